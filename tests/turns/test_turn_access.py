"""Revocation stops everything (#15): every model step and every tool call, reads included,
reads the user's role again. A member removed mid-turn reads nothing more of the project and
the turn stops with a clear error; one made a viewer goes on with read tools only."""

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.utils import timezone

from roject.identity.sessions import SessionStore
from roject.identity.tokens import api_token_create
from roject.models import ApiToken, Membership, Role
from roject.storage import project_root_create
from rojos.agent.access_ended import (
    REMOVED_MESSAGE,
    REMOVED_OUTCOME,
    REVOKED,
    SESSION_ENDED_MESSAGE,
    SESSION_ENDED_OUTCOME,
    TOKEN_ENDED_MESSAGE,
    TOKEN_ENDED_OUTCOME,
)
from rojos.models import TurnRecord
from rojos.tools import RojoTool, RojoToolContext, registry
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import DEFAULT_TOOLS, assert_history_valid, make_rojo, stored_history
from tests.support.live_server import parse_sse

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "the project's secret plans\n"


class MembershipChange(RojoTool):
    """Stands in for an owner who changes the caller's membership while the turn runs: the
    change lands between two calls of one response, or between two steps, every time."""

    name = "membership_change"
    description = "Remove the caller from the project, make them a viewer, or deactivate them."
    parameters = {
        "type": "object",
        "properties": {
            "to": {
                "type": "string",
                "enum": [
                    "removed",
                    "viewer",
                    "inactive",
                    "token revoked",
                    "password changed",
                    "signed out",
                ],
            }
        },
        "required": ["to"],
    }

    async def execute(self, args: dict, ctx: RojoToolContext) -> dict:
        rows = Membership.objects.filter(project_id=ctx.project_id, user=ctx.user)
        if args["to"] == "token revoked":  # its owner revoked the API token (it leaked)
            await ApiToken.objects.filter(user_id=ctx.user.pk).aupdate(revoked=timezone.now())
        elif args["to"] == "password changed":  # elsewhere: Django ends the other sessions
            await sync_to_async(_password_change)(ctx.user.pk)
        elif args["to"] == "signed out":  # a Log out in another tab of the same session
            await sync_to_async(_sessions_end)()
        elif args["to"] == "inactive":  # an admin deactivated the account (a leaver)
            await get_user_model().objects.filter(pk=ctx.user.pk).aupdate(is_active=False)
        elif args["to"] == "removed":
            await rows.adelete()
        else:
            await rows.aupdate(role=Role.VIEWER)
        return {"ok": True}


def _password_change(user_id: int) -> None:
    user = get_user_model().objects.get(pk=user_id)
    user.set_password("a new password, the old one leaked")
    user.save()


def _sessions_end() -> None:
    for key in Session.objects.values_list("session_key", flat=True):
        SessionStore(session_key=key).delete()


@pytest.fixture
def rojo(fake_provider, settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    registry.register(MembershipChange())
    yield make_rojo(fake_provider.base_url, tools=[*DEFAULT_TOOLS, "membership_change"])
    registry.unregister("membership_change")


@pytest.fixture
def root(project):
    root = project_root_create(project.pk)
    (root / "secret.txt").write_text(SECRET)
    return root


# What the turn asks next, once its user may no longer act: a read, or a write.
NEXT_CALLS = {
    "read": ("get_text_content", {"path": "secret.txt"}),
    "write": ("write_text_content", {"path": "secret.txt", "text": "overwritten\n"}),
}


def chat(client, project, rojo, message: str):
    """The raw SSE text of one turn, and its events."""
    response = client.post(
        f"/api/projects/{project.pk}/chat", json={"rojo": rojo.slug, "message": message}
    )
    assert response.status_code == 200, response.text
    return response.text, list(parse_sse(response.text.splitlines()))


@pytest.mark.parametrize("to", ["removed", "inactive"])
def test_a_member_removed_mid_response_reads_nothing_more_and_the_turn_stops(
    client_for, users, project, rojo, root, fake_provider, to
):
    """Before, the reads went on streaming the project's files to the removed user, and
    to one whose account an admin deactivated."""
    calls = [
        ("membership_change", {"to": to}),
        ("get_text_content", {"path": "secret.txt"}),
        ("list_files", {"path": ""}),
    ]
    fake_provider.add(stream(*tool_call_chunks(calls, arguments="whole")))

    text, events = chat(client_for(users["editor"]), project, rojo, "Read the secret")

    assert SECRET.strip() not in text
    results = [(e.data["name"], e.data["result"]) for e in events if e.type == "TOOL_RESULT"]
    assert results == [
        ("membership_change", {"ok": True}),
        ("get_text_content", REMOVED_OUTCOME.result),
        ("list_files", {"error": "interrupted"}),  # never ran: the turn stopped before it
    ]
    assert [(e.type, e.data) for e in events[-2:]] == [
        ("ERROR", {"message": REMOVED_MESSAGE, "code": "revoked"}),
        ("DONE", {}),
    ]
    assert len(fake_provider.requests) == 1  # nothing of the project went to the model after
    conversation = events[0].data["conversation"]
    assert_history_valid(stored_history(conversation))
    record = TurnRecord.objects.get()
    assert (record.status, record.error_code) == (TurnRecord.Status.ERROR, "revoked")


@pytest.mark.parametrize("call", NEXT_CALLS.values(), ids=NEXT_CALLS.keys())
def test_a_turn_asked_with_an_api_token_revoked_mid_response_reads_nothing_more(
    client_for, users, project, rojo, root, fake_provider, call
):
    """A turn outlives its request, but not the token it was asked with: a leaked token's
    owner revokes it, and the turn it started stops at its next call, as a removal does,
    with the reason: a write was refused as though its user were removed or made a viewer."""
    calls = [("membership_change", {"to": "token revoked"}), call]
    fake_provider.add(stream(*tool_call_chunks(calls, arguments="whole")))
    client = client_for()
    client.http.headers["Authorization"] = "Bearer " + (
        api_token_create(user=users["editor"], name="script").secret
    )

    text, events = chat(client, project, rojo, "Read the secret")

    assert SECRET.strip() not in text
    assert (root / "secret.txt").read_text() == SECRET
    results = [(e.data["name"], e.data["result"]) for e in events if e.type == "TOOL_RESULT"]
    assert results == [
        ("membership_change", {"ok": True}),
        (call[0], TOKEN_ENDED_OUTCOME.result),
    ]
    assert [(e.type, e.data) for e in events[-2:]] == [
        ("ERROR", {"message": TOKEN_ENDED_MESSAGE, "code": "revoked"}),
        ("DONE", {}),
    ]
    assert len(fake_provider.requests) == 1


@pytest.mark.parametrize("call", NEXT_CALLS.values(), ids=NEXT_CALLS.keys())
@pytest.mark.parametrize("ended", ["password changed", "signed out"])
def test_a_turn_asked_in_a_session_that_ends_mid_response_reads_nothing_more(
    client_for, users, project, rojo, root, fake_provider, ended, call
):
    """A turn outlives its request, but not the login session it was asked in: someone who
    took a session cookie starts a long turn, its owner changes their password (which ends
    every other session) or logs the session out, and the turn stops at its next call, as
    for a revoked API token. Before, it went on with the user's rights to its end, its
    stream read by whoever held the cookie; and a write was then refused as though its
    user were removed or made a viewer, not because the sign-in ended."""
    calls = [("membership_change", {"to": ended}), call]
    fake_provider.add(stream(*tool_call_chunks(calls, arguments="whole")))

    text, events = chat(client_for(users["editor"]), project, rojo, "Read the secret")

    assert SECRET.strip() not in text
    assert (root / "secret.txt").read_text() == SECRET
    results = [(e.data["name"], e.data["result"]) for e in events if e.type == "TOOL_RESULT"]
    assert results == [
        ("membership_change", {"ok": True}),
        (call[0], SESSION_ENDED_OUTCOME.result),
    ]
    assert [(e.type, e.data) for e in events[-2:]] == [
        ("ERROR", {"message": SESSION_ENDED_MESSAGE, "code": "revoked"}),
        ("DONE", {}),
    ]
    assert len(fake_provider.requests) == 1


def test_a_member_removed_between_steps_is_stopped_before_the_next_request(
    client_for, users, project, rojo, root, fake_provider
):
    """The step re-checks the role before asking the model again, with no call to refuse."""
    fake_provider.add(stream(*tool_call_chunks([("membership_change", {"to": "removed"})])))

    _, events = chat(client_for(users["editor"]), project, rojo, "Carry on")

    assert [e.type for e in events] == ["START", "TOOL_CALL", "TOOL_RESULT", "ERROR", "DONE"]
    assert events[-2].data == {"message": REMOVED_MESSAGE, "code": "revoked"}
    assert len(fake_provider.requests) == 1
    assert_history_valid(stored_history(events[0].data["conversation"]))


def test_a_member_made_a_viewer_mid_turn_goes_on_reading_with_read_tools_only(
    client_for, users, project, rojo, root, fake_provider
):
    """What a viewer's own turn would do: it may read, so it reads; it may not write."""
    calls = [
        ("membership_change", {"to": "viewer"}),
        ("write_text_content", {"path": "new.txt", "text": "written anyway"}),
        ("get_text_content", {"path": "secret.txt"}),
    ]
    fake_provider.add(
        stream(*tool_call_chunks(calls, arguments="whole")),
        stream(*text_chunks("I can only read now.")),
    )

    _, events = chat(client_for(users["editor"]), project, rojo, "Write, then read")

    results = [(e.data["name"], e.data["result"]) for e in events if e.type == "TOOL_RESULT"]
    assert results == [
        ("membership_change", {"ok": True}),
        ("write_text_content", REVOKED),
        ("get_text_content", SECRET),
    ]
    assert not (root / "new.txt").exists()
    assert events[-1].type == "DONE" and "ERROR" not in [e.type for e in events]
    offered = {tool["function"]["name"] for tool in fake_provider.requests[1]["tools"]}
    assert offered == {
        "read_path_meta",
        "get_text_content",
        "list_files",
        "search_text",
        "membership_change",
    }
    assert_history_valid(stored_history(events[0].data["conversation"]))
