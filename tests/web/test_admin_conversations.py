"""The conversation admin: filters, search by message text, and read-only messages in order."""

import html
import json
import re
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from roject.models import Project
from rojos.models import Conversation, FileChange, Message
from tests.support.helpers import make_rojo
from tests.support.replay_story import MESSAGES, REPLY_1, REPLY_2, TEXT_BEFORE, WRITE_ARGS

pytestmark = pytest.mark.django_db(transaction=True)

CHANGELIST = "admin:rojos_conversation_changelist"


@pytest.fixture
def other(users):
    """A conversation in another project, with another rojo and user."""
    project = Project.objects.create(name="Other", slug="other")
    rojo = make_rojo("https://api.example.com/v1", name="Other rojo", slug="other-rojo")
    conversation = Conversation.objects.create(
        project=project, rojo=rojo, user=users["owner"], title="Unrelated"
    )
    Message.objects.create(
        conversation=conversation, position=0, role="user", content="Unrelated chatter."
    )
    return conversation


def listed(admin_client, **query) -> list[Conversation]:
    response = admin_client.get(reverse(CHANGELIST), query)
    assert response.status_code == 200
    return list(response.context["cl"].result_list)


def test_changelist_offers_filters_by_project_rojo_and_user(admin_client, story, other):
    page = admin_client.get(reverse(CHANGELIST)).content.decode()

    for lookup, value in [
        ("project__id__exact", story.conversation.project_id),
        ("project__id__exact", other.project_id),
        ("rojo__id__exact", story.rojo.pk),
        ("rojo__id__exact", other.rojo_id),
        ("user__id__exact", story.conversation.user_id),
        ("user__id__exact", other.user_id),
    ]:
        assert f'href="?{lookup}={value}"' in page


@pytest.mark.parametrize("field", ["project", "rojo", "user"])
def test_each_filter_keeps_only_that_ones_conversations(admin_client, story, other, field):
    mine = getattr(story.conversation, f"{field}_id")
    theirs = getattr(other, f"{field}_id")

    assert listed(admin_client, **{f"{field}__id__exact": mine}) == [story.conversation]
    assert listed(admin_client, **{f"{field}__id__exact": theirs}) == [other]


def test_search_finds_a_conversation_by_the_text_of_any_message(admin_client, story, other):
    assert listed(admin_client, q="no notes.txt yet") == [story.conversation]
    assert listed(admin_client, q="chatter") == [other]
    assert listed(admin_client, q="nothing says this") == []


def test_search_lists_a_conversation_once_when_many_messages_match(admin_client, story, other):
    """ "notes.txt" is in the user's message, the tool's error and the rojo's reply."""
    matching = story.conversation.messages.filter(content__icontains="notes.txt").count()
    assert matching == 3

    assert listed(admin_client, q="notes.txt") == [story.conversation]


def test_change_page_shows_messages_in_order_with_readable_tool_calls_and_results(
    admin_client, story
):
    stored = story.messages()
    create, write = stored[1].tool_calls
    (read,) = stored[6].tool_calls

    response = admin_client.get(
        reverse("admin:rojos_conversation_change", args=[story.conversation.pk])
    )

    assert response.status_code == 200
    page = html.unescape(response.content.decode())
    in_order = [
        MESSAGES[0],
        TEXT_BEFORE,
        f'create_directory({{"path": "docs/intro"}}) · {create["id"]}',
        f"write_text_content({json.dumps(WRITE_ARGS)}) · {write['id']}",
        f"create_directory → ok ({create['id']})",
        f"write_text_content → ok ({write['id']})",
        REPLY_1,
        MESSAGES[1],
        f'get_text_content({{"path": "notes.txt"}}) · {read["id"]}',
        "No such file or directory: 'notes.txt'",
        f"get_text_content → error ({read['id']})",
        REPLY_2,
        MESSAGES[2],
    ]
    positions = [page.find(text) for text in in_order]
    assert -1 not in positions, in_order[positions.index(-1)]
    assert positions == sorted(positions)
    # The turn that failed shows its provider error.
    assert story.live[2][1]["message"] in page


def test_change_page_has_no_editable_inputs(admin_client, story):
    response = admin_client.get(
        reverse("admin:rojos_conversation_change", args=[story.conversation.pk])
    )

    page = response.content.decode()
    # Form fields only: the admin's navigation filter box is not part of the form.
    inputs = re.findall(r"<input\b[^>]*\bname=[^>]*>", page)
    assert len(inputs) > 20
    assert all('type="hidden"' in tag for tag in inputs), [
        tag for tag in inputs if 'type="hidden"' not in tag
    ]
    assert not re.search(r"<(textarea|select)\b", page)
    assert 'name="_save"' not in page
    assert "DELETE" not in page


def test_a_posted_change_is_refused_and_changes_nothing(admin_client, story):
    url = reverse("admin:rojos_conversation_change", args=[story.conversation.pk])

    response = admin_client.post(url, {"title": "Rewritten"})

    assert response.status_code == 403
    story.conversation.refresh_from_db()
    assert story.conversation.title == MESSAGES[0]


@pytest.mark.parametrize(
    "page", ["admin:rojos_conversation_changelist", "admin:rojos_filechange_changelist"]
)
def test_admin_lists_take_the_same_queries_for_2_and_40_rows(admin_client, project, users, page):
    """Rojo and user may be empty, so Django's own select_related skipped them: 2 per row."""
    rojo = make_rojo("https://api.example.com/v1")

    def rows(count: int) -> int:
        for _ in range(count):
            conversation = Conversation.objects.create(
                project=project, rojo=rojo, user=users["editor"]
            )
            FileChange.objects.create(
                project=project, conversation=conversation, tool="write_text_content",
                paths=["a.txt"], before=[False], after=["file:x"], key=uuid.uuid4().hex,
            )  # fmt: skip
        with CaptureQueriesContext(connection) as queries:
            assert admin_client.get(reverse(page)).status_code == 200
        return len(queries)

    assert rows(2) == rows(38)
