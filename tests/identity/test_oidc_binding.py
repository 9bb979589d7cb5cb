"""Which account a single sign-on lands in, against the real test provider: bound by
(issuer, sub) at the first login; an email joins only an account no one could have
prepared; email_verified taken strictly; usernames safe; an owner's removal stands."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from roject.identity.oidc.accounts import free_username
from roject.members.invitations import invitation_create
from roject.members.projects import project_create
from roject.members.services import member_add, member_remove, user_find
from roject.models import AuditAction, AuditEntry, Membership, OidcIdentity, Role
from tests.conftest import make_user
from tests.support.oidc_server import provider_sign_in

pytestmark = pytest.mark.django_db

User = get_user_model()
GOOD_PASSWORD = "correct horse battery 42"


@pytest.fixture
def docs(db):
    return project_create(name="Docs", owner=make_user("docs-owner"))


def _refusals() -> list[str]:
    failed = AuditEntry.objects.filter(action=AuditAction.LOGIN_FAILED).order_by("pk")
    return [entry.details.get("reason") for entry in failed]


def _signed_in(client) -> str | None:
    return client.session.get("_auth_user_id")


def test_an_invitation_cannot_prepare_an_account_for_someone_elses_sso(oidc, docs):
    """The owner invites alice@example.com, signs up on the link as "attacker": alice's
    first SSO sign-in gets her own new account, and adding "alice@…" finds hers."""
    owner = User.objects.get(username="docs-owner")
    made = invitation_create(
        by=owner, project_id=docs.pk, role=Role.VIEWER, email="alice@example.com"
    )
    data = {"username": "attacker", "password1": GOOD_PASSWORD, "password2": GOOD_PASSWORD}
    assert Client().post(f"/invitations/{made.token}/", data).status_code == 302
    attacker = User.objects.get(username="attacker")
    client = Client()
    provider_sign_in(client, username="alice")
    alice = User.objects.get(oidc_identities__subject__isnull=False)
    assert _signed_in(client) == str(alice.pk) and alice != attacker
    assert user_find(who="alice@example.com") == alice
    assert not Membership.objects.filter(user=attacker, project=docs, role=Role.EDITOR).exists()


@pytest.mark.parametrize(
    "existing",
    [
        {"password": "pw-a"},
        {"is_staff": True},
        {"is_superuser": True},
    ],
)
def test_an_account_with_a_password_or_staff_is_not_joined_by_email(oidc, docs, existing):
    User.objects.create_user("asmith", email="alice@example.com", **existing)
    client = Client()
    provider_sign_in(client, username="alice")
    assert _signed_in(client) is None
    assert "cannot be joined to single sign-on" in _refusals()[0]
    assert not OidcIdentity.objects.exists() and User.objects.count() == 2


def test_two_accounts_with_the_email_refuse_that_sign_in_only(oidc, docs):
    """A clear refusal for that address, not "Multiple users returned" for everyone."""
    for name in ("dup-a", "dup-b"):
        User.objects.create_user(name, email="alice@example.com")
    alice_client, bob_client = Client(), Client()
    provider_sign_in(alice_client, username="alice")
    provider_sign_in(bob_client, username="bob")
    assert _signed_in(alice_client) is None and _signed_in(bob_client) is not None
    assert _refusals() == ["Several accounts here have this email address: ask an administrator."]


@pytest.mark.parametrize("claim", ["false", "no", None])
def test_only_true_verifies_an_email_and_a_missing_claim_needs_the_setting(
    oidc, docs, settings, claim
):
    oidc.users_reset(alice={"email_verified": claim})
    client = Client()
    provider_sign_in(client, username="alice")
    assert _signed_in(client) is None and not User.objects.filter(username="alice").exists()
    assert _refusals() == ["The provider has not verified the email address."]
    settings.ROJO_OIDC_EMAIL_VERIFIED_DEFAULT = True
    provider_sign_in(client, username="alice")
    assert (_signed_in(client) is not None) == (claim is None)


def test_the_string_true_verifies_and_a_bound_user_returns_whatever_the_claim(oidc, docs):
    oidc.users_reset(alice={"email_verified": "true"})
    first = Client()
    provider_sign_in(first, username="alice")
    assert _signed_in(first) is not None
    oidc.users_reset(alice={"email_verified": False, "email": "other@example.com"})
    again = Client()
    provider_sign_in(again, username="alice")
    assert _signed_in(again) == _signed_in(first)


def test_a_username_from_the_provider_has_no_at_sign(oidc, docs):
    """preferred_username "ceo@corp.com" must not become a username like an address."""
    oidc.users_reset(alice={"preferred_username": "ceo@corp.com"})
    provider_sign_in(Client(), username="alice")
    assert User.objects.get(email="alice@example.com").username == "ceo"


@pytest.mark.parametrize(
    ("wanted", "made"),
    [
        ("=cmd|calc", "cmdcalc"),
        ("+-admin", "admin"),
        ("\uff46\uff55\uff4c\uff4c", "full"),  # fullwidth: NFKC makes it ASCII
        ("a b/c", "abc"),
        ("@@@", "x"),
        ("", "x"),
    ],
)
def test_free_usernames_are_normalised_and_safe(db, wanted, made):
    assert free_username({"preferred_username": wanted, "email": "x@example.com"}) == made


def test_an_owners_removal_is_not_undone_by_the_group_mapping(oidc, docs):
    client = Client()
    _, idp = provider_sign_in(client, username="alice")
    alice = User.objects.get(username="alice")
    assert Membership.objects.get(user=alice, project=docs).source == "oidc"
    owner = User.objects.get(username="docs-owner")
    member_remove(by=owner, project_id=docs.pk, user_id=alice.pk)
    provider_sign_in(Client(), username="alice", idp=idp)
    assert not Membership.objects.filter(user=alice, project=docs).exists()
    member_add(by=owner, project_id=docs.pk, who="alice", role="viewer")  # an owner's again
    membership = Membership.objects.get(user=alice, project=docs)
    assert (membership.role, membership.source) == (Role.VIEWER, "")


def test_an_owner_the_groups_demote_loses_their_pending_links(oidc, docs):
    _, idp = provider_sign_in(Client(), username="bob")
    bob = User.objects.get(username="bob")
    link = invitation_create(by=bob, project_id=docs.pk, role=Role.VIEWER).invitation
    oidc.users_reset(bob={"groups": ["docs-editors"]})
    provider_sign_in(Client(), username="bob", idp=idp)
    assert Membership.objects.get(user=bob, project=docs).role == Role.EDITOR
    link.refresh_from_db()
    assert link.revoked_at is not None
