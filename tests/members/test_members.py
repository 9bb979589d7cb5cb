"""The Members page: every member sees who is in the project, only owners change that, and
the last owner can be neither removed nor demoted, not even by two owners at once."""

from functools import partial

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client

from roject.members.invitations import invitation_create
from roject.members.services import MemberError, member_add, member_remove, member_role_set
from roject.models import Invitation, Membership, Role
from rojos.models import Conversation
from tests.conftest import make_user
from tests.support.helpers import audited, run_at_once


def _client(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def _memberships(project) -> dict[str, str]:
    return dict(project.memberships.values_list("user__username", "role"))


@pytest.fixture
def pending(project, users):
    """A pending invitation, and a user with an account who is in no project."""
    made = invitation_create(by=users["owner"], project_id=project.pk, role=Role.VIEWER)
    make_user("newbie")
    return made.invitation


def _requests(project, users, pending):
    base = f"/projects/{project.pk}"
    viewer = users["viewer"].pk
    return {
        "view": ("get", f"{base}/members/", {}),
        "add": ("post", f"{base}/members/add/", {"who": "newbie", "role": "editor"}),
        "role": ("post", f"{base}/members/{viewer}/role/", {"role": "editor"}),
        "remove": ("post", f"{base}/members/{viewer}/remove/", {}),
        "invite": ("post", f"{base}/invitations/", {"role": "viewer", "email": ""}),
        "revoke": ("post", f"{base}/invitations/{pending.pk}/revoke/", {}),
    }


ACTIONS = ["view", "add", "role", "remove", "invite", "revoke"]
# What each kind of user gets: owners change, members read, others see no project at all.
EXPECTED = {
    "owner": {"view": 200, **dict.fromkeys(ACTIONS[1:], 302)},
    "editor": {"view": 200, **dict.fromkeys(ACTIONS[1:], 403)},
    "viewer": {"view": 200, **dict.fromkeys(ACTIONS[1:], 403)},
    "outsider": dict.fromkeys(ACTIONS, 404),
    "anonymous": dict.fromkeys(ACTIONS, 302),
}
EFFECTS = {
    "add": lambda p: _memberships(p).get("newbie") == "editor",
    "role": lambda p: _memberships(p)["viewer"] == "editor",
    "remove": lambda p: "viewer" not in _memberships(p),
    "invite": lambda p: Invitation.objects.filter(project=p).count() == 2,
    "revoke": lambda p: Invitation.objects.get(project=p).revoked_at is not None,
}


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("who", list(EXPECTED))
def test_the_role_matrix(who, action, users, project, pending):
    """Owners change members; editors and viewers only see the list (403 on a change);
    a non-member gets 404 for everything; an anonymous visitor is sent to log in."""
    method, url, data = _requests(project, users, pending)[action]
    before = (_memberships(project), list(Invitation.objects.values()), audited().count())
    response = getattr(_client(users.get(who)), method)(url, data)
    assert response.status_code == EXPECTED[who][action]
    if who == "anonymous":
        assert response["Location"].startswith("/login/")
    changed = (_memberships(project), list(Invitation.objects.values()), audited().count())
    if who == "owner" and action != "view":
        assert response["Location"] == f"/projects/{project.pk}/members/"
        assert EFFECTS[action](project)
        assert changed[2] == before[2] + 1  # one audit entry
    else:
        assert changed == before
    if action == "view" and who in ("owner", "editor", "viewer"):
        page = response.content.decode()
        assert all(name in page for name in ("owner", "editor", "viewer"))
        assert ("Add member" in page) is (who == "owner")
        assert ("Change role" in page) is (who == "owner")


def test_the_project_page_links_to_members(users, project):
    page = _client(users["viewer"]).get(f"/projects/{project.pk}/").content.decode()
    assert f'href="/projects/{project.pk}/members/"' in page


def test_adding_by_email_and_the_clear_errors(users, project):
    """A user is found by username or by email; an unknown one, a member already and a bad
    role each give the form back with a message, a 400, and change nothing."""
    dana = make_user("dana")
    dana.email = "Dana@Example.com"
    dana.save()
    client = _client(users["owner"])
    url = f"/projects/{project.pk}/members/add/"
    response = client.post(url, {"who": "dana@example.com", "role": "viewer"}, follow=True)
    assert "dana is now a member (viewer)." in response.content.decode()
    for data, message in [
        ({"who": "nobody", "role": "viewer"}, "No user has the username or email"),
        ({"who": "editor", "role": "viewer"}, "editor is already a member."),
        ({"who": "outsider", "role": "admin"}, "Check the form"),
    ]:
        before = _memberships(project)
        response = client.post(url, data)
        assert response.status_code == 400
        assert message in response.content.decode()
        assert _memberships(project) == before


def test_names_are_escaped(users, project):
    evil = make_user("<script>alert(1)</script>")
    member_add(by=users["owner"], project_id=project.pk, who=evil.username, role=Role.VIEWER)
    page = _client(users["viewer"]).get(f"/projects/{project.pk}/members/").content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_last_owner_is_neither_demoted_nor_removed(users, project):
    owner = users["owner"]
    for change in (
        lambda: member_role_set(by=owner, project_id=project.pk, user_id=owner.pk, role="editor"),
        lambda: member_remove(by=owner, project_id=project.pk, user_id=owner.pk),
    ):
        with pytest.raises(MemberError, match="A project needs an owner"):
            change()
    response = _client(owner).post(
        f"/projects/{project.pk}/members/{owner.pk}/role/", {"role": "viewer"}
    )
    assert response.status_code == 400
    assert "A project needs an owner" in response.content.decode()
    assert _memberships(project)["owner"] == "owner"
    assert audited().count() == 0

    # With a second owner, the first can step down, and then no longer manage anyone.
    member_role_set(by=owner, project_id=project.pk, user_id=users["editor"].pk, role="owner")
    member_role_set(by=owner, project_id=project.pk, user_id=owner.pk, role="viewer")
    with pytest.raises(PermissionDenied):
        member_remove(by=owner, project_id=project.pk, user_id=users["viewer"].pk)
    entries = audited().filter(action="member_role_changed").order_by("id")
    assert [e.details for e in entries] == [
        {"from": "editor", "to": "owner"},
        {"from": "owner", "to": "viewer"},
    ]


def test_an_owner_who_leaves_is_sent_to_the_project_list(users, project):
    member_role_set(
        by=users["owner"], project_id=project.pk, user_id=users["editor"].pk, role="owner"
    )
    me = users["owner"].pk
    response = _client(users["owner"]).post(f"/projects/{project.pk}/members/{me}/remove/")
    assert response.status_code == 302 and response["Location"] == "/"
    assert _memberships(project) == {"editor": "owner", "viewer": "viewer"}


def test_each_change_writes_one_audit_entry(users, project):
    owner, newbie = users["owner"], make_user("newbie")
    member_add(by=owner, project_id=project.pk, who="newbie", role="viewer")
    member_role_set(by=owner, project_id=project.pk, user_id=newbie.pk, role="editor")
    member_role_set(by=owner, project_id=project.pk, user_id=newbie.pk, role="editor")  # no-op
    member_remove(by=owner, project_id=project.pk, user_id=newbie.pk)
    entries = list(audited().order_by("id"))
    assert [(e.action, e.details) for e in entries] == [
        ("member_added", {"role": "viewer"}),
        ("member_role_changed", {"from": "viewer", "to": "editor"}),
        ("member_removed", {"role": "editor"}),
    ]
    assert {(e.actor_name, e.project_id, e.object_repr) for e in entries} == {
        ("owner", project.pk, "newbie")
    }


def test_a_removed_member_sees_404_and_their_conversations_stay(users, project):
    viewer = users["viewer"]
    conversation = Conversation.objects.create(project=project, user=viewer, title="mine")
    client = _client(viewer)
    assert client.get(f"/projects/{project.pk}/").status_code == 200
    member_remove(by=users["owner"], project_id=project.pk, user_id=viewer.pk)
    assert client.get(f"/projects/{project.pk}/").status_code == 404
    assert client.get(f"/projects/{project.pk}/members/").status_code == 404
    assert client.get(f"/api/projects/{project.pk}/conversations").status_code == 404
    assert Conversation.objects.filter(pk=conversation.pk, user=viewer).exists()


@pytest.mark.django_db(transaction=True)
def test_two_owners_demoting_each_other_at_once_leave_one_owner(users, project):
    """Both start together; the owner rows are locked, so whichever goes second finds it is
    no longer an owner: one demotion happens, one owner is left."""
    first, second = users["owner"], users["editor"]
    for attempt in range(5):
        Membership.objects.filter(project=project, user__in=[first, second]).update(role=Role.OWNER)
        demote = partial(member_role_set, project_id=project.pk, role="editor")
        outcomes = run_at_once(
            partial(demote, by=first, user_id=second.pk),
            partial(demote, by=second, user_id=first.pk),
        )
        kinds = sorted(type(outcome).__name__ for outcome in outcomes)
        assert kinds == ["Membership", "PermissionDenied"], (attempt, outcomes)
        assert Membership.objects.filter(project=project, role=Role.OWNER).count() == 1


def test_an_address_names_a_user_by_email_only_never_by_a_username_like_it(users, project):
    """A user named "ceo@corp.com" does not stand in for the one whose email that is."""
    impostor = make_user("ceo@corp.com")
    ceo = make_user("ceo")
    ceo.email = "CEO@corp.com"
    ceo.save()
    made = member_add(by=users["owner"], project_id=project.pk, who="ceo@corp.com", role="viewer")
    assert made.user == ceo
    assert not Membership.objects.filter(user=impostor).exists()


def test_an_address_several_users_share_is_refused_not_guessed(users, project):
    for name in ("twin-a", "twin-b"):
        twin = make_user(name)
        twin.email = "twin@example.com"
        twin.save()
    before = _memberships(project)
    with pytest.raises(MemberError, match="Several users have the email"):
        member_add(by=users["owner"], project_id=project.pk, who="twin@example.com", role="viewer")
    assert _memberships(project) == before


def test_an_owner_demoted_or_removed_loses_their_pending_links(users, project):
    """Their links were an owner's word; another owner's links stay."""
    member_role_set(
        by=users["owner"], project_id=project.pk, user_id=users["editor"].pk, role="owner"
    )
    member_role_set(
        by=users["owner"], project_id=project.pk, user_id=users["viewer"].pk, role="owner"
    )
    links = {
        name: invitation_create(by=users[name], project_id=project.pk, role=Role.VIEWER).invitation
        for name in ("owner", "editor", "viewer")
    }
    member_role_set(
        by=users["owner"], project_id=project.pk, user_id=users["editor"].pk, role="viewer"
    )
    member_remove(by=users["owner"], project_id=project.pk, user_id=users["viewer"].pk)
    revoked = {
        name: Invitation.objects.get(pk=link.pk).revoked_at is not None
        for name, link in links.items()
    }
    assert revoked == {"owner": False, "editor": True, "viewer": True}
