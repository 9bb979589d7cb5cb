"""Configuring MCP servers: the command, the admin (write-only secrets, the tool listing,
a rojo's servers), the API, and what a turn of a rojo without any costs."""

import sys

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from rojos.mcp.sealed import unseal
from rojos.mcp.spec import rojo_mcp_links
from rojos.models import McpServer, Rojo, RojoMcpServer
from rojos.web.selectors import rojo_get
from tests.support.helpers import command_error, make_rojo, run
from tests.support.mcp_helpers import time_server
from tests.web.test_admin import rojo_form

SECRET = "s3cret-value-that-must-not-show"


def test_create_mcp_server_prints_its_slug_and_keeps_each_kind_of_setting(db):
    slug = run(
        "create_mcp_server",
        "--name",
        "Files",
        "--command",
        "npx -y @modelcontextprotocol/server-filesystem {project_root}",
        "--env",
        f"TOKEN={SECRET}",
        "--env-from",
        "HOME_DIR=HOME",
    ).strip()
    http = run(
        "create_mcp_server",
        "--name",
        "Tracker",
        "--url",
        "https://mcp.example.com/mcp",
        "--header-from",
        "Authorization=TRACKER_AUTH",
    ).strip()

    assert (slug, http) == ("files", "tracker")
    files = McpServer.objects.get(slug="files")
    assert files.command == "npx"
    assert files.args == ["-y", "@modelcontextprotocol/server-filesystem", "{project_root}"]
    assert files.env == {"TOKEN": SECRET} and files.env_from == {"HOME_DIR": "HOME"}
    tracker = McpServer.objects.get(slug="tracker")
    assert tracker.transport == "http" and tracker.headers_from == {"Authorization": "TRACKER_AUTH"}


def test_create_mcp_server_refuses_bad_input_in_one_line(db):
    run("create_mcp_server", "--name", "Time", "--command", "uvx mcp-server-time")
    assert "already exists" in command_error(
        "create_mcp_server", "--name", "Time", "--command", "x"
    )
    assert "NAME=VALUE" in command_error(
        "create_mcp_server", "--name", "Other", "--command", "x", "--env", "NOVALUE"
    )
    assert "for HTTP servers" in command_error(
        "create_mcp_server", "--name", "Other", "--command", "x", "--header-from", "A=B"
    )
    assert "URL" in command_error("create_mcp_server", "--name", "Web", "--url", "not a url")


def test_create_rojo_mcp_servers_links_them_and_names_unknown_ones(db):
    time_server()
    slug = run(
        "create_rojo",
        "--name",
        "Clock",
        "--base-url",
        "https://api.example.com/v1",
        "--model",
        "m",
        "--mcp-servers",
        "time",
    ).strip()
    link = RojoMcpServer.objects.get(rojo__slug=slug)
    assert link.server.slug == "time" and link.tools is None and link.ask_before
    error = command_error(
        "create_rojo",
        "--name",
        "Other",
        "--base-url",
        "https://api.example.com/v1",
        "--model",
        "m",
        "--mcp-servers",
        "time,nope",
    )
    assert error == "unknown MCP servers: nope (known: time)"
    assert not Rojo.objects.filter(slug="other").exists()


def server_form(**fields) -> dict:
    data = {
        "name": "Edge",
        "slug": "edge",
        "transport": "stdio",
        "command": sys.executable,
        "args": '["-m", "mcp_server_time"]',
        "env_from": "{}",
        "set_env": "",
        "url": "",
        "headers_from": "{}",
        "set_headers": "",
    }
    return {**data, **fields}


def test_admin_keeps_stored_variables_write_only(admin_client):
    add = admin_client.post(
        reverse("admin:rojos_mcpserver_add"), server_form(set_env=f"TOKEN={SECRET}\nMODE=x")
    )
    assert add.status_code == 302
    server = McpServer.objects.get(slug="edge")
    assert server.env == {"TOKEN": SECRET, "MODE": "x"}
    change_url = reverse("admin:rojos_mcpserver_change", args=[server.pk])

    page = admin_client.get(change_url).content.decode()
    assert SECRET not in page and "MODE, TOKEN" in page
    assert admin_client.post(change_url, server_form(set_env="MODE=")).status_code == 302
    server.refresh_from_db()
    assert server.env == {"TOKEN": SECRET}  # kept; MODE removed
    listing = admin_client.get(reverse("admin:rojos_mcpserver_changelist")).content.decode()
    assert SECRET not in listing


def test_admin_action_lists_the_tools_a_server_offers(admin_client):
    server = time_server()
    response = admin_client.post(
        reverse("admin:rojos_mcpserver_changelist"),
        {"action": "refresh_tools", "_selected_action": [server.pk]},
        follow=True,
    )

    assert "Time offers 2 tools: get_current_time, convert_time" in response.content.decode()
    server.refresh_from_db()
    assert {t["name"] for t in server.listed_tools} == {"get_current_time", "convert_time"}
    page = admin_client.get(reverse("admin:rojos_mcpserver_change", args=[server.pk]))
    assert "<code>get_current_time</code> (read-only)" in page.content.decode()


def test_staff_who_may_only_view_servers_cannot_start_one_to_list_its_tools(client, users):
    """Listing runs the server's command as the app: a change, for superusers only."""
    from django.contrib.auth.models import Permission

    server = time_server()
    staff = users["viewer"]
    staff.is_staff = True
    staff.save()
    staff.user_permissions.add(Permission.objects.get(codename="view_mcpserver"))
    client.force_login(staff)
    changelist = reverse("admin:rojos_mcpserver_changelist")

    page = client.get(changelist).content.decode()
    client.post(changelist, {"action": "refresh_tools", "_selected_action": [server.pk]})

    assert server.name in page and 'value="refresh_tools"' not in page
    server.refresh_from_db()
    assert server.listed_tools == []


def test_admin_action_says_why_a_server_cannot_be_listed(admin_client):
    server = time_server(command="/nonexistent/server")
    response = admin_client.post(
        reverse("admin:rojos_mcpserver_changelist"),
        {"action": "refresh_tools", "_selected_action": [server.pk]},
        follow=True,
    )
    assert "could not be started" in response.content.decode()


def test_rojo_admin_chooses_servers_and_tools(admin_client):
    server = time_server()
    data = rojo_form(
        **{
            "mcp_links-TOTAL_FORMS": "1",
            "mcp_links-0-server": str(server.pk),
            "mcp_links-0-tools": '["get_current_time"]',
            "mcp_links-0-ask_before": "on",
        }
    )
    assert admin_client.post(reverse("admin:rojos_rojo_add"), data).status_code == 302
    link = RojoMcpServer.objects.get(rojo__slug="admin-rojo")
    assert link.server == server and link.tools == ["get_current_time"]


@pytest.mark.django_db(transaction=True)  # the live server reads the rows
def test_rojos_api_lists_their_mcp_servers_without_secrets(client_for, users):
    rojo = make_rojo("https://api.example.com/v1")
    RojoMcpServer.objects.create(
        rojo=rojo, server=time_server(env={"TOKEN": SECRET}), tools=["get_current_time"]
    )

    response = client_for(users["viewer"]).get("/api/rojos")

    assert response.json()[0]["mcp_servers"] == [
        {
            "slug": "time",
            "name": "Time",
            "transport": "stdio",
            "tools": ["get_current_time"],
            "ask_before": True,
            "sign_in": "",
        }
    ]
    assert SECRET not in response.text


@pytest.mark.django_db
def test_a_rojo_without_mcp_servers_costs_its_turn_no_query_for_them():
    """rojo_get knows in its own query whether the rojo uses MCP servers; one that uses
    some costs one query per turn (none per step: tool lists live in the session)."""
    plain = make_rojo("https://api.example.com/v1")
    with_mcp = make_rojo("https://api.example.com/v1", name="Clock", slug="clock")
    RojoMcpServer.objects.create(rojo=with_mcp, server=time_server())

    plain_loaded, mcp_loaded = rojo_get(plain.slug), rojo_get("clock")
    with CaptureQueriesContext(connection) as none:
        assert rojo_mcp_links(plain_loaded) == ()
    with CaptureQueriesContext(connection) as one:
        (link,) = rojo_mcp_links(mcp_loaded)
    assert len(none) == 0 and len(one) == 1
    assert link.spec.slug == "time" and link.tools is None


def test_only_superusers_may_add_or_change_mcp_servers(client, db):
    """A staff user holding every MCP server permission still cannot add, change or
    delete one (its command runs as the app); a superuser can."""
    from django.contrib.auth.models import Permission, User

    staff = User.objects.create_user("staff", password="pw", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(codename__endswith="_mcpserver"))
    server = McpServer.objects.create(name="Edge", slug="edge", command=sys.executable)
    client.force_login(staff)
    assert client.post(reverse("admin:rojos_mcpserver_add"), server_form()).status_code == 403
    change = reverse("admin:rojos_mcpserver_change", args=[server.pk])
    client.post(change, server_form(command="/bin/sh"))
    assert McpServer.objects.get(pk=server.pk).command == sys.executable
    delete = reverse("admin:rojos_mcpserver_delete", args=[server.pk])
    assert client.post(delete, {"post": "yes"}).status_code == 403
    staff.is_superuser = True
    staff.save()
    assert (
        client.post(reverse("admin:rojos_mcpserver_add"), server_form(slug="new")).status_code
        == 302
    )


def test_admin_keeps_the_oauth_client_secret_sealed_and_write_only(admin_client):
    """The client secret an admin sets is stored sealed and never shown again; a client ID
    needs the authorization server it was registered with."""
    fields = {
        "transport": "http",
        "command": "",
        "args": "[]",
        "url": "https://mcp.example.com/mcp",
        "sign_in": "person",
        "oauth_client_id": "rojo-at-tracker",
        "set_oauth_client_secret": SECRET,
    }
    refused = admin_client.post(reverse("admin:rojos_mcpserver_add"), server_form(**fields))
    assert refused.status_code == 200 and not McpServer.objects.exists()
    fields["oauth_issuer"] = "https://auth.example.com"
    add = admin_client.post(reverse("admin:rojos_mcpserver_add"), server_form(**fields))
    assert add.status_code == 302
    server = McpServer.objects.get(slug="edge")
    assert SECRET.encode() not in bytes(server.oauth_client_secret)
    assert unseal(server.oauth_client_secret) == SECRET.encode()
    change_url = reverse("admin:rojos_mcpserver_change", args=[server.pk])
    page = admin_client.get(change_url).content.decode()
    assert SECRET not in page and "OAuth client secret" in page
    fields["set_oauth_client_secret"] = ""  # left empty: the stored one is kept
    assert admin_client.post(change_url, server_form(**fields)).status_code == 302
    server.refresh_from_db()
    assert unseal(server.oauth_client_secret) == SECRET.encode()
    listing = admin_client.get(reverse("admin:rojos_mcpserver_changelist")).content.decode()
    assert SECRET not in listing


def test_create_mcp_server_registers_an_oauth_server_with_its_secret_sealed(db, monkeypatch):
    monkeypatch.setenv("TRACKER_CLIENT_SECRET", SECRET)
    run(
        "create_mcp_server",
        "--name",
        "Tracker",
        "--url",
        "https://mcp.example.com/mcp",
        "--sign-in",
        "person",
        "--oauth-client-id",
        "rojo",
        "--oauth-issuer",
        "https://auth.example.com",
        "--oauth-client-secret-env",
        "TRACKER_CLIENT_SECRET",
    )
    tracker = McpServer.objects.get(slug="tracker")
    assert (tracker.sign_in, tracker.oauth_client_id) == ("person", "rojo")
    assert unseal(tracker.oauth_client_secret) == SECRET.encode()
    assert SECRET.encode() not in bytes(tracker.oauth_client_secret)
    monkeypatch.delenv("TRACKER_CLIENT_SECRET")
    refused = command_error(
        "create_mcp_server", "--name", "Wiki", "--url", "https://wiki.example.com/mcp",
        "--sign-in", "person", "--oauth-client-id", "rojo",
    )  # fmt: skip
    assert "name the authorization server" in refused
