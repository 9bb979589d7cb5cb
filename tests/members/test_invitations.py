"""Invitation links: signed, expiring, single-use; accepted by a logged-in user or by a
visitor who signs up on the link's page; anything else gets a clear 4xx page and changes
nothing."""

import time
from datetime import timedelta
from functools import partial

import pytest
from django.contrib.auth import get_user_model
from django.core import signing
from django.test import Client
from django.utils import timezone

from roject.identity.tokens import token_digest
from roject.members.invitations import InvitationRefused, invitation_accept, invitation_create
from roject.models import Invitation, Membership, Role
from tests.conftest import make_user
from tests.support.helpers import audited, run_at_once

GOOD_PASSWORD = "correct horse battery 42"


def _client(user=None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def made(users, project):
    return invitation_create(
        by=users["owner"], project_id=project.pk, role=Role.EDITOR, email="new@example.com"
    )


def _url(token: str) -> str:
    return f"/invitations/{token}/"


def _state():
    """Everything an invitation's use could change."""
    return (
        sorted(Membership.objects.values_list("user__username", "project_id", "role")),
        list(Invitation.objects.values_list("accepted_at", "accepted_by", "revoked_at")),
        list(get_user_model().objects.values_list("username", flat=True).order_by("pk")),
        audited().count(),
    )


def test_a_logged_in_user_accepts_and_joins_with_the_role(made, users, project):
    newbie = make_user("newbie")
    client = _client(newbie)
    page = client.get(_url(made.token)).content.decode()
    assert "Demo Project" in page and "editor" in page and "Join the project" in page
    before = audited().count()
    response = client.post(_url(made.token))
    assert response.status_code == 302 and response["Location"] == f"/projects/{project.pk}/"
    assert Membership.objects.get(user=newbie, project=project).role == Role.EDITOR
    invitation = Invitation.objects.get()
    assert invitation.accepted_by == newbie and invitation.accepted_at is not None
    entries = list(audited().order_by("id"))[before:]
    assert [(e.action, e.actor_name, e.details) for e in entries] == [
        ("invitation_accepted", "newbie", {"role": "editor"})
    ]
    assert client.get(f"/projects/{project.pk}/").status_code == 200


def test_only_a_digest_is_stored_and_the_link_is_shown_once(users, project):
    client = _client(users["owner"])
    response = client.post(
        f"/projects/{project.pk}/invitations/", {"role": "viewer", "email": ""}, follow=True
    )
    page = response.content.decode()
    link = page.split('aria-label="The invitation link"')[0].rsplit('value="', 1)[1].split('"')[0]
    assert link.startswith("http://testserver/invitations/")
    token = link.removeprefix("http://testserver/invitations/").rstrip("/")
    secret = token.split(":")[0]
    invitation = Invitation.objects.get()
    assert invitation.digest == token_digest(secret) and secret not in invitation.digest
    assert token not in client.get(f"/projects/{project.pk}/members/").content.decode()
    entry = audited().get(action="invitation_created")
    assert secret not in str(entry.details) and entry.details == {"role": "viewer", "email": ""}
    assert _client(make_user("newbie")).get(_url(token)).status_code == 200


def _tampered(token: str) -> list[str]:
    secret, stamp, signature = token.split(":")
    flip = {"A": "B"}.get(signature[-1], "A")
    unknown = signing.TimestampSigner(salt="roject.invitations").sign("x" * 43)
    return [
        f"{secret}:{stamp}:{signature[:-1]}{flip}",
        f"{secret[:-1]}{'a' if secret[-1] != 'a' else 'b'}:{stamp}:{signature}",
        secret,
        "garbage",
        unknown,
    ]


def test_a_tampered_or_unknown_link_is_a_404_that_changes_nothing(made, users):
    client = _client(make_user("newbie"))
    before = _state()
    for token in _tampered(made.token):
        for method in (client.get, client.post):
            response = method(_url(token))
            assert response.status_code == 404, token
            assert "This invitation link is not valid." in response.content.decode()
    assert _state() == before


def _refused(client, token: str, status: int, message: str) -> None:
    before = _state()
    for method in (client.get, client.post):
        response = method(_url(token))
        assert response.status_code == status
        assert message in response.content.decode()
    assert _state() == before


def test_an_expired_link_is_refused(made, users, settings):
    client = _client(make_user("newbie"))
    Invitation.objects.update(expires=timezone.now() - timedelta(seconds=1))
    _refused(client, made.token, 410, "This invitation has expired.")


def test_a_link_signed_longer_ago_than_the_setting_is_refused(made, settings):
    """The signature's own timestamp counts, whatever the row says."""

    class LastWeek(signing.TimestampSigner):
        def timestamp(self):
            return signing.b62_encode(int(time.time()) - 3 * 86400)

    secret = made.token.split(":")[0]
    old = LastWeek(salt="roject.invitations").sign(secret)
    client = _client(make_user("newbie"))
    assert client.get(_url(old)).status_code == 200  # 3 days old, 7 allowed
    settings.ROJO_INVITATION_DAYS = 2
    _refused(client, old, 410, "This invitation has expired.")


def test_a_revoked_link_is_refused(made, users, project):
    response = _client(users["owner"]).post(
        f"/projects/{project.pk}/invitations/{made.invitation.pk}/revoke/"
    )
    assert response.status_code == 302
    assert audited().filter(action="invitation_revoked").count() == 1
    _refused(_client(make_user("newbie")), made.token, 410, "This invitation was revoked.")
    _refused(Client(), made.token, 410, "This invitation was revoked.")
    # Revoked once: a second revoke finds no pending invitation.
    again = _client(users["owner"]).post(
        f"/projects/{project.pk}/invitations/{made.invitation.pk}/revoke/"
    )
    assert again.status_code == 404
    assert audited().filter(action="invitation_revoked").count() == 1


def test_a_link_works_once(made, users, project):
    first, second = make_user("first"), make_user("second")
    assert _client(first).post(_url(made.token)).status_code == 302
    _refused(_client(second), made.token, 410, "This invitation has been used already.")
    assert not Membership.objects.filter(user=second).exists()


@pytest.mark.django_db(transaction=True)
def test_two_people_using_one_link_at_once_make_one_member(users, project):
    for attempt in range(5):
        made = invitation_create(by=users["owner"], project_id=project.pk, role=Role.VIEWER)
        a, b = make_user(f"a{attempt}"), make_user(f"b{attempt}")
        outcomes = run_at_once(
            partial(invitation_accept, token=made.token, user=a),
            partial(invitation_accept, token=made.token, user=b),
        )
        kinds = sorted(type(outcome).__name__ for outcome in outcomes)
        assert kinds == ["InvitationRefused", "Membership"], (attempt, outcomes)
        assert Membership.objects.filter(user__in=[a, b]).count() == 1
        accepted = Invitation.objects.get(pk=made.invitation.pk).accepted_by
        assert accepted in (a, b) and Membership.objects.filter(user=accepted).exists()
    assert audited().filter(action="invitation_accepted").count() == 5


def test_a_member_already_is_told_so_and_the_link_stays_unused(made, users, project):
    _refused(_client(users["viewer"]), made.token, 409, "You are a member of Demo Project")
    assert Membership.objects.get(user=users["viewer"], project=project).role == Role.VIEWER
    with pytest.raises(InvitationRefused):
        invitation_accept(token=made.token, user=users["owner"])


def test_a_visitor_signs_up_on_the_page_and_joins(made, project):
    client = Client()
    page = client.get(_url(made.token)).content.decode()
    assert "Create account and join" in page
    assert f'href="/login/?next=/invitations/{made.token.replace(":", "%3A")}/"' in page
    before = _state()
    weak = client.post(
        _url(made.token), {"username": "carol", "password1": "123", "password2": "123"}
    )
    assert weak.status_code == 400 and "This password is too short" in weak.content.decode()
    taken = client.post(
        _url(made.token),
        {"username": "editor", "password1": GOOD_PASSWORD, "password2": GOOD_PASSWORD},
    )
    assert taken.status_code == 400 and "already exists" in taken.content.decode()
    assert _state() == before

    response = client.post(
        _url(made.token),
        {"username": "carol", "password1": GOOD_PASSWORD, "password2": GOOD_PASSWORD},
    )
    assert response.status_code == 302 and response["Location"] == f"/projects/{project.pk}/"
    carol = get_user_model().objects.get(username="carol")
    # The owner's note is no proof of an address: the account gets none (SSO, add by email).
    assert carol.email == "" and carol.check_password(GOOD_PASSWORD)
    assert Membership.objects.get(user=carol, project=project).role == Role.EDITOR
    assert client.get(f"/projects/{project.pk}/").status_code == 200  # logged in
    assert [e.action for e in audited().filter(actor_user_id=carol.pk)] == ["invitation_accepted"]


def test_signing_up_with_a_used_link_makes_no_account(made, users):
    invitation_accept(token=made.token, user=make_user("first"))
    _refused(Client(), made.token, 410, "used already")
    data = {"username": "carol", "password1": GOOD_PASSWORD, "password2": GOOD_PASSWORD}
    assert Client().post(_url(made.token), data).status_code == 410
    assert not get_user_model().objects.filter(username="carol").exists()


def test_logging_in_first_comes_back_to_the_link(made, project):
    make_user("dana")
    client = Client()
    response = client.post(
        "/login/", {"username": "dana", "password": "pw-dana", "next": _url(made.token)}
    )
    assert response.status_code == 302 and response["Location"] == _url(made.token)
    assert "Join the project" in client.get(_url(made.token)).content.decode()
    assert client.post(_url(made.token)).status_code == 302
    assert Membership.objects.filter(user__username="dana", project=project).exists()


def test_another_projects_owner_cannot_revoke(made, users):
    from roject.members.projects import project_create

    project_create(name="Other", owner=users["outsider"])
    response = _client(users["outsider"]).post(
        f"/projects/{made.invitation.project_id}/invitations/{made.invitation.pk}/revoke/"
    )
    assert response.status_code == 404
    assert Invitation.objects.get().revoked_at is None


def test_with_password_login_off_the_link_offers_no_sign_up_and_refuses_one(made, settings):
    """Accounts then come from single sign-on: a visitor signs in first and comes back."""
    settings.ROJO_PASSWORD_LOGIN = False
    client = Client()
    page = client.get(_url(made.token)).content.decode()
    assert "Create account and join" not in page and "/login/?next=" in page
    before = _state()
    data = {"username": "carol", "password1": GOOD_PASSWORD, "password2": GOOD_PASSWORD}
    assert client.post(_url(made.token), data).status_code == 403
    assert _state() == before


def test_a_username_with_an_at_sign_is_refused_at_sign_up(made):
    """Else "ceo@corp.com" as a username could pass for that address (members.user_find)."""
    client = Client()
    before = _state()
    response = client.post(
        _url(made.token),
        {"username": "ceo@corp.com", "password1": GOOD_PASSWORD, "password2": GOOD_PASSWORD},
    )
    assert response.status_code == 400 and "cannot contain" in response.content.decode()
    assert _state() == before


def test_a_link_lapses_when_its_maker_is_no_longer_an_owner(made, users, project):
    # Demoted behind the services' back (a raw update): the accept-time check alone holds.
    Membership.objects.filter(user=users["owner"], project=project).update(role=Role.EDITOR)
    before = _state()
    response = _client(users["outsider"]).post(_url(made.token))
    assert response.status_code == 410 and "revoked" in response.content.decode()
    with pytest.raises(InvitationRefused):
        invitation_accept(token=made.token, user=users["outsider"])
    assert _state() == before


def test_a_link_lapses_while_its_maker_is_deactivated(made, users, project):
    """A deactivated account is no project's member: its links admit no one, as owner or
    otherwise, until it is active again."""
    users["owner"].is_active = False
    users["owner"].save()
    before = _state()
    response = _client(users["outsider"]).post(_url(made.token))
    assert response.status_code == 410 and "revoked" in response.content.decode()
    assert _state() == before

    users["owner"].is_active = True
    users["owner"].save()
    assert _client(users["outsider"]).post(_url(made.token)).status_code == 302


def test_a_link_of_a_deleted_maker_is_refused(made, users):
    users["owner"].delete()
    response = _client(users["outsider"]).get(_url(made.token))
    assert response.status_code == 410
