"""A call that waited for approval runs only if its user may still make it once approved.

The wait can be long (minutes; an hour when routed to owners). An MCP tool that is not
read-only asks first, and keeps no undo record, so it does not go through the change lock's
role check that the built-in tools do. Before, a member removed, or made a viewer, while
their call waited still had it run, on the MCP server, once someone approved it."""

import pytest

from roject.models import Membership, Role
from roject.storage import project_root_create
from rojos.agent.access_ended import REVOKED
from rojos.models import RojoMcpServer
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import parse_sse, read_until
from tests.support.mcp_helpers import edge_server

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("change", ["removed", "made a viewer"])
def test_an_mcp_call_approved_after_its_user_lost_the_right_does_not_run(
    client_for, users, project, fake_provider, settings, change
):
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_MCP_IDLE_SECONDS = 2  # the edge server stops soon after the test
    root = project_root_create(project.pk)
    rojo = make_rojo(fake_provider.base_url)
    RojoMcpServer.objects.create(rojo=rojo, server=edge_server())
    fake_provider.add(
        stream(*tool_call_chunks([("edge__write_note", {"name": "n.txt", "text": "hi"})])),
        stream(*text_chunks("Written.")),
    )
    fake_provider.allow_leftovers()
    editor, owner = client_for(users["editor"]), client_for(users["owner"])
    with editor.chat_stream(project.pk, rojo=rojo.slug, message="Write a note") as response:
        events = parse_sse(response.iter_lines())
        seen = read_until(events, "APPROVAL_REQUIRED")
        conversation, asked = seen[0].data["conversation"], seen[-1].data["id"]
        memberships = Membership.objects.filter(user=users["editor"], project=project)
        if change == "removed":
            memberships.delete()
        else:
            memberships.update(role=Role.VIEWER)
        approved = owner.post(
            f"/api/conversations/{conversation}/approve", json={"call": asked, "approve": True}
        )
        assert approved.status_code == 200, approved.text
        rest = list(events)
    [result] = [e.data for e in rest if e.type == "TOOL_RESULT"]
    assert not result["ok"]
    assert result["result"] == REVOKED
    assert not (root / "n.txt").exists(), "the MCP call ran for a user who lost the right"
