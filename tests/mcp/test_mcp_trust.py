"""An MCP server's annotations count only once an admin trusts the server: until then a tool
that claims readOnlyHint (the edge server's read_stamp, which writes stamp.txt) is a writing
tool, kept from viewers and asking editors for approval; trusted, it is read-only."""

import pytest
from django.urls import reverse

from roject.storage import project_root
from rojos.models import RojoMcpServer
from tests.mcp.test_mcp_turns import chat, offered, results
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.mcp_helpers import edge_server

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_untrusted_servers_tools_are_never_offered_in_a_viewers_chat(project, fake_provider):
    rojo = make_rojo(fake_provider.base_url)
    RojoMcpServer.objects.create(rojo=rojo, server=edge_server(trusted=False))
    fake_provider.add(stream(*text_chunks("Hello.")))

    chat("Hi", user="viewer")

    names = offered(fake_provider.requests[0])
    assert not {name for name in names if name.startswith("edge__")}
    assert "read_path_meta" in names  # the built-in reading tools are still there


def test_an_untrusted_servers_read_only_claim_asks_an_editor_for_approval(project, fake_provider):
    """Without --yes nobody approves: the call is denied and never writes."""
    rojo = make_rojo(fake_provider.base_url)
    RojoMcpServer.objects.create(rojo=rojo, server=edge_server(trusted=False))
    fake_provider.add(
        stream(*tool_call_chunks([("edge__read_stamp", {})])),
        stream(*text_chunks("Denied.")),
    )

    events = chat("Read the stamp")

    assert "edge__read_stamp" in offered(fake_provider.requests[0])
    (approval,) = [e for e in events if e["type"] == "APPROVAL_REQUIRED"]
    assert approval["name"] == "edge__read_stamp"
    assert approval["preview"]["mcp"]["tool"] == "read_stamp"
    assert results(events)[0]["result"] == {"error": "denied by the user"}
    assert not (project_root(project.pk) / "stamp.txt").exists()


def test_once_trusted_its_read_only_tools_run_unasked_and_reach_viewers(project, fake_provider):
    rojo = make_rojo(fake_provider.base_url)
    server = edge_server(trusted=False)
    RojoMcpServer.objects.create(rojo=rojo, server=server)
    server.trusted = True
    server.save(update_fields=["trusted"])
    fake_provider.add(
        stream(*text_chunks("Hello.")),
        stream(*tool_call_chunks([("edge__read_stamp", {})])),
        stream(*text_chunks("Stamped.")),
    )

    chat("Hi", user="viewer")
    events = chat("Read the stamp")

    viewer_names = offered(fake_provider.requests[0])
    assert "edge__read_stamp" in viewer_names and "edge__write_note" not in viewer_names
    assert not [e for e in events if e["type"] == "APPROVAL_REQUIRED"]
    assert results(events)[0]["ok"]
    assert (project_root(project.pk) / "stamp.txt").read_text() == "stamped"


def test_the_admin_shows_which_servers_are_trusted_and_what_it_means(admin_client):
    trusted = edge_server(name="Known", slug="known")
    edge_server(trusted=False)

    listing = admin_client.get(reverse("admin:rojos_mcpserver_changelist")).content.decode()
    form = admin_client.get(reverse("admin:rojos_mcpserver_change", args=[trusted.pk]))

    assert "column-trusted" in listing
    assert listing.count('alt="True"') == 1 and listing.count('alt="False"') == 1
    page = form.content.decode()
    assert 'name="trusted"' in page and "checked" in page.split('name="trusted"')[1][:80]
    assert "tool annotations: its tools marked readOnlyHint run without approval" in page


def test_the_admin_calls_an_untrusted_servers_read_only_tool_writing(admin_client):
    """The tool list on a server's page follows the trust: a hint alone makes nothing
    read-only."""
    server = edge_server(trusted=False)
    server.listed_tools = [{"name": "read_stamp", "annotations": {"readOnlyHint": True}}]
    server.save()

    page = admin_client.get(reverse("admin:rojos_mcpserver_change", args=[server.pk]))

    text = page.content.decode()
    assert "<code>read_stamp</code> (counts as writing: the server is not trusted)" in text
    server.trusted = True
    server.save()
    page = admin_client.get(reverse("admin:rojos_mcpserver_change", args=[server.pk]))
    assert "<code>read_stamp</code> (read-only)" in page.content.decode()
