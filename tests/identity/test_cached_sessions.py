"""Sessions are read from the cache, not the database; their user still is, on every request,
so a deactivated user, a changed password or a removed user is logged out at once."""

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session

from roject.identity.live_auth import asession_signed_in
from roject.identity.sessions import SessionStore
from tests.conftest import make_user

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def member(project):
    user = make_user("sessioned")
    project.memberships.create(user=user, role="viewer")
    return user


def _projects(client) -> int:
    return client.get("/api/projects").status_code


def test_a_session_is_read_from_the_cache_with_no_database_row_read(client_for, member):
    client = client_for(member)
    assert _projects(client) == 200
    # The row is gone from the database, the cache still holds the session.
    Session.objects.all().delete()
    assert _projects(client) == 200
    assert settings.SESSION_ENGINE == "roject.identity.sessions"


def test_a_turns_check_of_its_session_never_puts_back_a_copy_a_logout_deleted(client_for, member):
    """A logout deletes the session's cached copy, then its row. A running turn's check of
    its session, between the two, read the row and wrote it back to the cache (Django's
    cached_db load on a miss), so the session came back to life there, logged in again.
    The check is a read: the logout leaves the session ended."""
    client = client_for(member)
    assert _projects(client) == 200
    key = client.http.cookies[settings.SESSION_COOKIE_NAME]
    SessionStore(session_key=key).cached_copy_delete()  # the logout's first step

    assert async_to_sync(asession_signed_in)(session_key=key, user_id=member.pk)

    Session.objects.filter(session_key=key).delete()  # and its second
    assert _projects(client) == 401


def _deactivate(users, user):
    users.filter(pk=user.pk).update(is_active=False)


def _password_change(users, user):
    users.filter(pk=user.pk).update(password="pbkdf2_sha256$1$changed$")


def _remove(users, user):
    users.filter(pk=user.pk).delete()


@pytest.mark.parametrize("change", [_deactivate, _password_change, _remove])
def test_a_cached_session_stops_working_at_once_when_its_user_changes(client_for, member, change):
    """Changed behind the app's back (a queryset update, as another process might): the
    session stays in the cache, and the user read on the next request ends it."""
    client = client_for(member)
    assert _projects(client) == 200
    change(get_user_model().objects, member)
    assert _projects(client) == 401


def test_a_cache_that_cannot_be_reached_leaves_sessions_to_the_database(
    client_for, member, settings
):
    """Redis down: logging in, and each request after it, use the database's session."""
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:9/0",  # nothing listens there: refused at once
        }
    }
    client = client_for(member)
    assert _projects(client) == 200
    assert _projects(client) == 200
    assert Session.objects.count() == 1


def test_a_logout_while_the_cache_cannot_be_reached_is_refused_not_pretended(
    client_for, member, settings
):
    """Redis out of reach as the user logs out (down, or cut off from this process only):
    the database's row could go but the cached copy could not, and once the cache is back
    that copy logged the session in again (a stolen cookie outlived its logout). So the
    logout is refused, said so, with nothing changed; it works once the cache is back."""
    reachable = settings.CACHES
    client = client_for(member)
    assert _projects(client) == 200  # the session is in the cache
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:9/0",  # nothing listens there: refused at once
        }
    }
    refused = client.post("/logout/", follow_redirects=False)
    assert refused.status_code == 503
    assert "try again" in refused.text.lower()
    assert Session.objects.count() == 1
    settings.CACHES = reachable
    assert _projects(client) == 200  # still logged in, as the answer said
    cookie = client.http.cookies[settings.SESSION_COOKIE_NAME]
    assert client.post("/logout/", follow_redirects=False).status_code == 302
    client.http.cookies.set(settings.SESSION_COOKIE_NAME, cookie)
    assert _projects(client) == 401  # the logged-out cookie is dead everywhere


def test_a_session_to_end_while_the_cache_cannot_be_reached_gets_503_not_500(
    client_for, member, project, settings
):
    """The user's password changed while Redis is down: Django ends such a session as it
    reads the user, and that needs the cache. The page and the API say to try again (503);
    once the cache is back, the session is ended (401)."""
    reachable = settings.CACHES
    client = client_for(member)
    assert _projects(client) == 200
    _password_change(get_user_model().objects, member)
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:9/0",  # nothing listens there: refused at once
        }
    }
    api = client.get("/api/projects")
    assert api.status_code == 503 and "try again" in api.json()["detail"]
    page = client.get(f"/projects/{project.pk}/")
    assert page.status_code == 503 and "Try again" in page.text
    assert page.headers["Content-Security-Policy"]
    settings.CACHES = reachable
    assert _projects(client) == 401
