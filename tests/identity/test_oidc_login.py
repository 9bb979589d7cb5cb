"""Single sign-on against a real OpenID Connect provider (django-oauth-toolkit in its own
process): users made and matched from its claims, roles from its groups, refusals that are
failed logins, and the provider's logout."""

from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from roject.members.projects import project_create
from roject.models import AuditAction, AuditEntry, Membership, Role
from tests.conftest import make_user
from tests.support.oidc_server import CLIENT_ID, provider_sign_in

pytestmark = pytest.mark.django_db

User = get_user_model()


@pytest.fixture
def docs(db):
    """Project `docs`, whose roles the provider's groups give; its owner was made by hand."""
    return project_create(name="Docs", owner=make_user("docs-owner"))


def entries(action) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action=action).order_by("pk"))


def test_first_sign_in_creates_the_user_from_the_claims_with_the_mapped_role(oidc, docs):
    client = Client()
    response, _ = provider_sign_in(client, username="alice")
    assert response.status_code == 302 and response["Location"] == "/"
    alice = User.objects.get(email="alice@example.com")
    assert (alice.username, alice.first_name, alice.last_name) == ("alice", "Alice", "Liddell")
    assert not alice.has_usable_password()
    assert client.session["_auth_user_id"] == str(alice.pk)
    membership = Membership.objects.get(user=alice, project=docs)
    assert (membership.role, membership.source) == (Role.EDITOR, "oidc")
    [login] = entries(AuditAction.LOGIN)
    assert (login.actor_name, login.details, login.address) == (
        "alice",
        {"via": "oidc"},
        "127.0.0.1",
    )
    [added] = entries(AuditAction.MEMBER_ADDED)
    assert added.project_id == docs.pk and added.actor_kind == "system"
    assert added.details == {"via": "oidc", "member": "alice", "role": "editor"}
    assert client.get("/").status_code == 200


def test_the_sign_in_comes_back_to_the_page_asked_for_never_to_another_site(oidc, docs):
    response, idp = provider_sign_in(Client(), username="alice", next_url="/tokens/")
    assert response["Location"] == "/tokens/"
    response, _ = provider_sign_in(
        Client(), username="alice", idp=idp, next_url="https://evil.test/"
    )
    assert response["Location"] == "/"


def test_the_highest_mapped_group_wins(oidc, docs):
    provider_sign_in(Client(), username="bob")
    bob = User.objects.get(username="bob")
    assert Membership.objects.get(user=bob, project=docs).role == Role.OWNER


def test_roles_follow_the_groups_at_each_login_and_only_those_the_mapping_gave(
    oidc, docs, settings
):
    wiki = project_create(name="Wiki", owner=make_user("wiki-owner"))
    settings.ROJO_OIDC_GROUP_ROLES = [
        *settings.ROJO_OIDC_GROUP_ROLES,
        ("docs-editors", "wiki", "viewer"),
    ]
    alice = User.objects.create_user("alice", email="alice@example.com")
    Membership.objects.create(user=alice, project=wiki, role=Role.EDITOR)  # given by hand

    _, idp = provider_sign_in(Client(), username="alice")
    assert Membership.objects.get(user=alice, project=docs).role == Role.EDITOR
    oidc.users_reset(alice={"groups": ["docs-admins"]})
    provider_sign_in(Client(), username="alice", idp=idp)
    assert Membership.objects.get(user=alice, project=docs).role == Role.OWNER
    [changed] = entries(AuditAction.MEMBER_ROLE_CHANGED)
    assert changed.details == {"via": "oidc", "member": "alice", "from": "editor", "to": "owner"}
    oidc.users_reset(alice={"groups": []})
    provider_sign_in(Client(), username="alice", idp=idp)
    assert not Membership.objects.filter(user=alice, project=docs).exists()
    [removed] = entries(AuditAction.MEMBER_REMOVED)
    assert removed.details == {"via": "oidc", "member": "alice", "role": "owner"}
    wiki_membership = Membership.objects.get(user=alice, project=wiki)
    assert (wiki_membership.role, wiki_membership.source) == (Role.EDITOR, "")
    assert len(entries(AuditAction.LOGIN)) == 3 and len(entries(AuditAction.MEMBER_ADDED)) == 1


def test_the_last_owner_is_not_removed_by_a_group_change(oidc, settings):
    docs = project_create(name="Docs", owner=make_user("someone"))
    Membership.objects.filter(project=docs).delete()
    _, idp = provider_sign_in(Client(), username="bob")
    bob = User.objects.get(username="bob")
    oidc.users_reset(bob={"groups": []})
    provider_sign_in(Client(), username="bob", idp=idp)
    assert Membership.objects.get(user=bob, project=docs).role == Role.OWNER
    assert entries(AuditAction.MEMBER_REMOVED) == []


def test_the_issuer_alone_finds_the_discovery_document(oidc, docs, settings):
    settings.ROJO_OIDC_DISCOVERY_URL = ""
    settings.ROJO_OIDC_ISSUER = oidc.base_url + "/o/"
    client = Client()
    response, _ = provider_sign_in(client, username="alice")
    assert response["Location"] == "/" and "_auth_user_id" in client.session


def test_an_id_token_signature_is_always_checked(db):
    """Whatever algorithms a discovery document lists, `none` is never taken."""
    from roject.identity.oidc.config import OidcUnavailable, _sign_algorithm

    assert _sign_algorithm({"id_token_signing_alg_values_supported": ["HS256", "RS256"]}) == "RS256"
    assert _sign_algorithm({"id_token_signing_alg_values_supported": ["none", "ES256"]}) == "ES256"
    assert _sign_algorithm({}) == "RS256"
    with pytest.raises(OidcUnavailable):
        _sign_algorithm({"id_token_signing_alg_values_supported": ["none"]})


def test_an_existing_account_without_a_password_is_joined_by_its_email_once(oidc, docs):
    """An account no one could have prepared (no password, not staff) is joined at the first
    sign-in and bound to its (iss, sub): later sign-ins find it whatever its email."""
    existing = User.objects.create_user("asmith", email="ALICE@example.com")
    client = Client()
    provider_sign_in(client, username="alice")
    assert client.session["_auth_user_id"] == str(existing.pk)
    assert User.objects.filter(email__iexact="alice@example.com").count() == 1
    existing.refresh_from_db()
    assert existing.username == "asmith" and existing.oidc_identities.count() == 1
    User.objects.filter(pk=existing.pk).update(email="changed@example.org")
    again = Client()
    provider_sign_in(again, username="alice")
    assert again.session["_auth_user_id"] == str(existing.pk)


def test_a_taken_username_gets_a_unique_variant(oidc, docs):
    User.objects.create_user("alice", email="another-alice@example.org")
    provider_sign_in(Client(), username="alice")
    assert User.objects.get(email="alice@example.com").username == "alice-2"


def test_an_unverified_email_is_refused_and_matches_no_account(oidc, docs):
    """The provider says it never checked owner@example.com: no takeover of its owner."""
    victim = User.objects.create_user("victim", email="owner@example.com")
    client = Client()
    response, _ = provider_sign_in(client, username="mallory")
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert "_auth_user_id" not in client.session
    assert list(User.objects.filter(email="owner@example.com")) == [victim]
    assert entries(AuditAction.LOGIN) == []
    [failed] = entries(AuditAction.LOGIN_FAILED)
    assert failed.details == {
        "via": "oidc",
        "reason": "The provider has not verified the email address.",
    }
    assert "failed" in client.get("/login/").content.decode()


def test_a_callback_with_a_state_this_session_never_started_is_a_failed_login(oidc, docs):
    client = Client()
    client.get("/oidc/authenticate/")
    response = client.get("/oidc/callback/", {"code": "stolen-code", "state": "forged"})
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert "_auth_user_id" not in client.session
    fresh = Client().get("/oidc/callback/", {"code": "stolen-code", "state": "forged"})
    assert fresh.status_code == 302
    reasons = [entry.details["reason"] for entry in entries(AuditAction.LOGIN_FAILED)]
    assert reasons == ["unknown state", "no sign-in started"]


def test_an_inactive_account_is_refused(oidc, docs):
    User.objects.create_user("alice", email="alice@example.com", is_active=False)
    client = Client()
    response, _ = provider_sign_in(client, username="alice")
    assert response["Location"] == "/login/" and "_auth_user_id" not in client.session
    [failed] = entries(AuditAction.LOGIN_FAILED)
    assert failed.details == {"via": "oidc", "reason": "inactive account"}
    assert entries(AuditAction.LOGIN) == []


def test_an_account_deactivated_after_its_first_sign_in_gets_no_roles_from_its_groups(oidc, docs):
    """Its sign-ins are refused, and its groups no longer change its memberships (each
    refused sign-in gave it the mapped role again, audited)."""
    provider_sign_in(Client(), username="alice")
    alice = User.objects.get(username="alice")
    Membership.objects.filter(user=alice).delete()
    alice.is_active = False
    alice.save()

    provider_sign_in(Client(), username="alice")

    assert not Membership.objects.filter(user=alice).exists()


def test_an_account_deactivated_after_its_sign_in_is_signed_out_at_its_next_request(oidc, docs):
    """As a password login's: the session's user is read again at each request, and an
    inactive one is no one (before, the library's backend returned it all the same)."""
    client = Client()
    response, _ = provider_sign_in(client, username="alice")
    assert response.status_code == 302 and client.get("/tokens/").status_code == 200
    User.objects.filter(username="alice").update(is_active=False)

    answer = client.get("/tokens/")
    made = client.post("/tokens/", {"name": "after", "once": "x"})

    assert answer.status_code == 302 and answer["Location"].startswith("/login/")
    assert made.status_code == 302 and made["Location"].startswith("/login/")


def test_a_token_request_the_provider_refuses_is_a_failed_login_not_an_error(oidc, docs, settings):
    client = Client()
    settings.ROJO_OIDC_CLIENT_SECRET = "not-the-secret"
    response, _ = provider_sign_in(client, username="alice")
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert not User.objects.filter(username="alice").exists()
    [failed] = entries(AuditAction.LOGIN_FAILED)
    assert failed.details == {"via": "oidc", "reason": "provider request failed (HTTPError)"}


def test_an_unreachable_provider_fails_cleanly_and_password_logins_go_on(db, settings):
    from roject.identity.oidc.config import oidc_discovery_forget
    from tests.support.server_process import _free_port

    oidc_discovery_forget()
    settings.ROJO_OIDC_DISCOVERY_URL = f"http://127.0.0.1:{_free_port()}/.well-known/x"
    settings.ROJO_OIDC_CLIENT_ID = "rojo"
    client = Client()
    response = client.get("/oidc/authenticate/")
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert "cannot be reached right now" in client.get("/login/").content.decode()
    make_user("dana")
    assert client.post("/login/", {"username": "dana", "password": "pw-dana"}).status_code == 302
    assert [entry.details for entry in entries(AuditAction.LOGIN)] == [{"via": "password"}]


def test_a_provider_error_is_a_failed_login(oidc, docs):
    client = Client()
    client.get("/oidc/authenticate/")
    response = client.get("/oidc/callback/", {"error": "access_denied", "state": "x"})
    assert response.status_code == 302 and "_auth_user_id" not in client.session
    [failed] = entries(AuditAction.LOGIN_FAILED)
    assert failed.details == {"via": "oidc", "reason": "provider error"}


def test_logout_ends_the_provider_session_too(oidc, docs):
    client = Client()
    _, idp = provider_sign_in(client, username="alice")
    id_token = client.session["oidc_id_token"]
    assert client.get("/logout/").status_code == 405
    response = client.post("/logout/")
    target = urlsplit(response["Location"])
    assert f"{target.scheme}://{target.netloc}" == oidc.base_url and target.path == "/o/logout/"
    assert parse_qs(target.query) == {
        "client_id": [CLIENT_ID],
        "id_token_hint": [id_token],
        "post_logout_redirect_uri": ["http://testserver/login/"],
    }
    assert "_auth_user_id" not in client.session
    [logout] = entries(AuditAction.LOGOUT)
    assert logout.actor_name == "alice"
    back = idp.get(response["Location"], allow_redirects=False)
    assert back.status_code == 302 and back.headers["Location"] == "http://testserver/login/"
    # The provider's session has ended: the next sign-in asks for the password again.
    start = Client().get("/oidc/authenticate/")
    again = idp.get(start["Location"], allow_redirects=False)
    assert urlsplit(again.headers["Location"]).path == "/accounts/login/"


def test_the_logout_form_may_end_at_the_provider(oidc, docs):
    """Chromium applies CSP form-action to the redirect a form's answer makes."""
    client = Client()
    provider_sign_in(client, username="alice")
    policy = client.get("/")["Content-Security-Policy"]
    assert f"form-action 'self' {oidc.base_url};" in policy


def test_the_login_page_offers_the_provider_beside_the_password_form(oidc):
    page = Client().get("/login/?next=/tokens/").content.decode()
    assert (
        "Sign in with Test provider" in page and 'href="/oidc/authenticate/?next=/tokens/"' in page
    )
    assert 'name="password"' in page


def test_with_password_login_off_no_password_is_taken(oidc, settings):
    settings.ROJO_PASSWORD_LOGIN = False
    make_user("carol")
    client = Client()
    page = client.get("/login/").content.decode()
    assert "Sign in with Test provider" in page and 'name="password"' not in page
    refused = client.post("/login/", {"username": "carol", "password": "pw-carol"})
    assert (
        refused.status_code == 403 and "Password login is switched off" in refused.content.decode()
    )
    admin = client.post("/admin/login/", {"username": "carol", "password": "pw-carol"})
    assert admin.status_code == 302 and admin["Location"].startswith("/login/?next=")
    assert "_auth_user_id" not in client.session
    assert entries(AuditAction.LOGIN) == []


def test_without_oidc_settings_the_login_is_the_password_form_alone(db):
    client = Client()
    page = client.get("/login/").content.decode()
    assert "Sign in with" not in page and 'name="password"' in page
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=a&state=b").status_code == 404
    assert "form-action 'self';" in client.get("/login/")["Content-Security-Policy"]
