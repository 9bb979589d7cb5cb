"""The session's user is read by the project's backend (roject/identity/backends.py), with
every check Django's get_user makes; a session stored with Django's ModelBackend's path
before it goes on, and either kind ends when its user is deactivated or changes password."""

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import BACKEND_SESSION_KEY, authenticate, get_user_model
from django.contrib.auth.hashers import MD5PasswordHasher
from django.contrib.auth.signals import user_login_failed
from django.test import Client

from tests.conftest import make_user

pytestmark = pytest.mark.django_db(transaction=True)

DJANGOS = "django.contrib.auth.backends.ModelBackend"
PREPARED = "roject.identity.backends.PreparedModelBackend"


@pytest.fixture
def member(project):
    user = make_user("sessioned")
    project.memberships.create(user=user, role="viewer")
    return user


def _client(client_for, user, backend: str):
    """A live-server client whose session names `backend`, as a login by it stored it."""
    client = client_for()
    django_client = Client()
    django_client.force_login(user, backend=backend)
    _session_cookie_set(client, django_client.cookies[django_settings.SESSION_COOKIE_NAME].value)
    return client


def _session_cookie_set(client, key: str) -> None:
    client.http.cookies.set(django_settings.SESSION_COOKIE_NAME, key)


def _projects(client) -> int:
    return client.get("/api/projects").status_code


def _deactivate(user):
    get_user_model().objects.filter(pk=user.pk).update(is_active=False)


def _password_change(user):
    user.set_password("a-new-password")
    user.save(update_fields=["password"])


def test_a_password_login_names_the_prepared_backend_django_s_kept_after_it():
    assert django_settings.AUTHENTICATION_BACKENDS[0] == PREPARED
    assert DJANGOS in django_settings.AUTHENTICATION_BACKENDS[1:]
    make_user("newcomer")
    client = Client()
    assert client.login(username="newcomer", password="pw-newcomer")
    assert client.session[BACKEND_SESSION_KEY] == PREPARED


@pytest.mark.parametrize("backend", [DJANGOS, PREPARED])
def test_a_session_of_either_backend_signs_in(client_for, member, backend):
    client = _client(client_for, member, backend)
    assert _projects(client) == 200
    assert _projects(client) == 200


@pytest.mark.parametrize("change", [_deactivate, _password_change])
@pytest.mark.parametrize("backend", [DJANGOS, PREPARED])
def test_a_session_of_either_backend_ends_at_the_next_request_after_its_user_changes(
    client_for, member, backend, change
):
    client = _client(client_for, member, backend)
    assert _projects(client) == 200
    change(member)
    assert _projects(client) == 401


def test_a_session_naming_a_backend_no_longer_listed_is_signed_out(client_for, member, settings):
    client = _client(client_for, member, PREPARED)
    settings.AUTHENTICATION_BACKENDS = [DJANGOS]
    assert _projects(client) == 401


def test_a_session_signed_with_a_fallback_key_goes_on_and_without_it_ends(
    client_for, member, settings
):
    """A new SECRET_KEY with the old one in SECRET_KEY_FALLBACKS keeps the session (its
    hash made under the old key); the old key dropped, the session ends."""
    client = _client(client_for, member, PREPARED)
    old = settings.SECRET_KEY
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "a-new-secret-" + "y" * 40, [old]
    key = client.http.cookies[django_settings.SESSION_COOKIE_NAME]
    response = client.get("/api/projects")
    assert response.status_code == 200
    # Django's get_user gave the session a new key with the new secret's hash; its cookie
    # is Secure, which the client keeps to https, so it is handed on here.
    renewed = response.cookies[django_settings.SESSION_COOKIE_NAME]
    assert renewed != key
    client.http.cookies.clear()
    _session_cookie_set(client, renewed)
    settings.SECRET_KEY_FALLBACKS = []
    assert _projects(client) == 200
    settings.SECRET_KEY = "another-secret-" + "z" * 40
    assert _projects(client) == 401


class CountingHasher(MD5PasswordHasher):
    """The tests' hasher, counting the passwords it checks."""

    checked = 0

    def verify(self, password, encoded):
        CountingHasher.checked += 1
        return super().verify(password, encoded)


def test_a_wrong_password_is_checked_once_and_reported_once(settings):
    """Django's ModelBackend, kept after the project's for the sessions it named, does not
    hash a refused password a second time."""
    settings.PASSWORD_HASHERS = [f"{__name__}.CountingHasher"]
    make_user("guessed")
    failures = []

    def failed(sender, credentials, **kwargs):
        failures.append(credentials["username"])

    user_login_failed.connect(failed)
    try:
        CountingHasher.checked = 0
        assert authenticate(None, username="guessed", password="wrong") is None
        assert CountingHasher.checked == 1
        assert failures == ["guessed"]
        assert authenticate(None, username="guessed", password="pw-guessed") is not None
    finally:
        user_login_failed.disconnect(failed)


def test_an_inactive_account_cannot_log_in_with_its_right_password():
    make_user("resting")
    get_user_model().objects.filter(username="resting").update(is_active=False)
    assert authenticate(None, username="resting", password="pw-resting") is None
