"""The read-only page of a conversation ("Copy link"): every member of the project opens it,
whatever their role; anyone else gets the 404 of a conversation that does not exist."""

import pytest
from django.test import Client

from roject.members.projects import project_create
from roject.models import Membership, Role
from rojos.models import Conversation, Message
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

XSS = '<img src=x onerror="window.pwned=1">'


@pytest.fixture
def author(project):
    """An editor of the project who started the conversation; owner, editor and viewer are
    the other members."""
    user = make_user("author")
    Membership.objects.create(user=user, project=project, role=Role.EDITOR)
    return user


@pytest.fixture
def conversation(project, author):
    conversation = Conversation.objects.create(project=project, user=author, title=f"Plan {XSS}")
    Message.objects.create(conversation=conversation, position=0, role="user", content="Hi")
    return conversation


def read_url(project_id: int, conversation_id: int) -> str:
    return f"/projects/{project_id}/c/{conversation_id}/read/"


def client_for(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


@pytest.mark.parametrize("who", ["author", "owner", "editor", "viewer"])
def test_every_member_reads_it_with_its_author_and_times(who, users, author, project, conversation):
    """The author and the other members, whatever their role, get the page: the title, who
    started it and when, and no composer to write with."""
    reader = author if who == "author" else users[who]
    response = client_for(reader).get(read_url(project.pk, conversation.pk))
    assert response.status_code == 200
    body = response.content.decode()
    assert '<span class="read-author">author</span>' in body
    assert f'datetime="{conversation.created.isoformat()}"' in body
    assert '<form class="composer" hidden inert>' in body
    assert response.context["conversation"] == conversation


def test_a_non_member_gets_the_404_of_a_missing_conversation(users, project, conversation):
    """An outsider cannot tell a conversation of another project from one that never was."""
    outsider = client_for(users["outsider"])
    existing = outsider.get(read_url(project.pk, conversation.pk))
    missing = client_for(users["owner"]).get(read_url(project.pk, conversation.pk + 1000))
    assert existing.status_code == missing.status_code == 404
    assert existing.content == missing.content


def test_anonymous_visitors_are_sent_to_log_in(project, conversation):
    url = read_url(project.pk, conversation.pk)
    response = client_for(None).get(url)
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next={url}"


def test_a_conversation_of_another_project_is_not_reachable_through_yours(
    users, project, conversation
):
    """The link's project must be the conversation's: a member of project A who puts a
    conversation of project B under A's URL gets a 404 (and B's own URL is a 404 too)."""
    other = project_create(name="Other", owner=users["outsider"])
    elsewhere = Conversation.objects.create(project=other, user=users["outsider"], title="B")
    owner = client_for(users["owner"])
    assert owner.get(read_url(project.pk, elsewhere.pk)).status_code == 404
    assert owner.get(read_url(other.pk, elsewhere.pk)).status_code == 404
    # And the outsider, owner of B, cannot reach A's conversation under B's URL either.
    assert client_for(users["outsider"]).get(read_url(other.pk, conversation.pk)).status_code == 404


def test_ids_that_are_not_numbers_are_a_404(users, project):
    owner = client_for(users["owner"])
    assert owner.get(f"/projects/{project.pk}/c/99999999999999999999/read/").status_code == 404
    assert owner.get(f"/projects/{project.pk}/c/abc/read/").status_code == 404


def test_the_title_and_names_are_escaped(users, project, conversation, author):
    """A title or a username with markup shows as text, never as an element."""
    author.username = f"eve{XSS}"
    author.save()
    body = client_for(users["viewer"]).get(read_url(project.pk, conversation.pk)).content.decode()
    assert XSS not in body
    assert "&lt;img src=x onerror=&quot;window.pwned=1&quot;&gt;" in body


def test_the_page_reads_through_the_api_that_checks_membership_again(users, project, conversation):
    """What the page's script fetches answers a member (a viewer here) and 404s an outsider:
    the conversation's detail, its stream (the stored turn, or the live one) and its export."""
    reads = [
        f"/api/conversations/{conversation.pk}",
        f"/api/conversations/{conversation.pk}/stream",
        f"/api/conversations/{conversation.pk}/export?format=markdown",
    ]
    viewer, outsider = client_for(users["viewer"]), client_for(users["outsider"])
    for url in reads:
        assert viewer.get(url).status_code == 200, url
        assert outsider.get(url).status_code == 404, url


def test_a_viewer_with_the_link_cannot_change_the_conversation(users, project, conversation):
    """The link gives nothing a viewer did not have: renaming, pinning, deleting, approving and
    stopping someone else's conversation stay refused (403), and nothing changed."""
    viewer = client_for(users["viewer"])
    base = f"/api/conversations/{conversation.pk}"
    answers = [
        viewer.patch(base, {"title": "Mine"}, content_type="application/json"),
        viewer.delete(base),
        viewer.post(f"{base}/approve", {"call": "c1", "approve": True}, "application/json"),
        viewer.post(f"{base}/stop"),
    ]
    assert [a.status_code for a in answers] == [403, 403, 403, 403]
    conversation.refresh_from_db()
    assert conversation.title == f"Plan {XSS}"
