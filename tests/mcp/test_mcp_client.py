"""Tools from MCP servers, against real servers: the reference time server and
tests/support/mcp_servers/edge.py (crash, hang, isError, huge output, list_changed), over stdio and
streamable HTTP."""

import asyncio
import json
import logging
import re
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async

from roject.models import Role
from rojos.mcp import exit_hook
from rojos.mcp.names import model_tool_name
from rojos.mcp.pool import mcp_pool, mcp_pool_close
from rojos.mcp.schemas import clean_schema
from rojos.mcp.spec import McpLink, ServerSpec
from rojos.mcp.tools import TurnTools
from rojos.models import McpServer
from rojos.tools import RojoToolContext, ToolCall, registry
from tests.support.mcp_helpers import HttpEdge, edge_server, time_server, wait_gone

pytestmark = pytest.mark.django_db(transaction=True)
PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@pytest.fixture
async def pool():
    """The loop's MCP sessions, all stopped (their servers gone) at the end of the test."""
    yield mcp_pool()
    await mcp_pool_close()


def link(server, tools=None, ask_before=True, trusted=True) -> McpLink:
    return McpLink(spec=ServerSpec.of(server), tools=tools, ask_before=ask_before, trusted=trusted)


async def turn_tools(root, *links, role=Role.EDITOR):
    tools = TurnTools(registry, links)
    ctx = RojoToolContext(project_id=1, project_root=root, role=role)
    await tools.prepare(ctx)
    return tools, ctx


async def call(tools, ctx, name, args=None):
    return await tools.run(ToolCall.parse("call_1", name, args or {}), ctx)


def test_model_names_are_valid_for_every_provider_and_unique_when_shortened():
    """<server>__<tool>, with bad characters replaced and long names cut with a hash."""
    assert model_tool_name("time", "get_current_time") == "time__get_current_time"
    odd = model_tool_name("fs", "read.file/v2")
    long_a = model_tool_name("server", "a" * 80 + "one")
    long_b = model_tool_name("server", "a" * 80 + "two")
    for name in (odd, long_a, long_b):
        assert PROVIDER_NAME.match(name), name
    assert odd.startswith("fs__read_file_v2_")
    assert long_a != long_b and len(long_a) == 64
    assert model_tool_name("fs", "a.b") != model_tool_name("fs", "a_b")


def test_schemas_are_cleaned_to_the_plain_subset():
    """References inlined, optional types made plain, extras dropped, as for our tools."""
    schema = {
        "type": "object",
        "title": "Args",
        "additionalProperties": False,
        "$defs": {"Mode": {"type": "string", "enum": ["a", "b"], "title": "Mode"}},
        "properties": {
            "mode": {"$ref": "#/$defs/Mode", "default": "a"},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "Max."},
            "tags": {"type": "array", "items": {"type": "string", "format": "uuid"}},
        },
        "required": ["mode", "ghost"],
    }
    assert clean_schema(schema) == {
        "type": "object",
        "properties": {
            "mode": {"type": "string", "enum": ["a", "b"]},
            "limit": {"type": "integer", "description": "Max."},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["mode"],
    }
    assert clean_schema(None) == {"type": "object", "properties": {}}


async def test_time_server_tools_are_offered_and_called_over_stdio(pool, root):
    """The reference server's tools come as time__*, cleaned, and a call returns its
    structured content as JSON."""
    server = await sync_to_async(time_server)()
    tools, ctx = await turn_tools(root, link(server))

    names = [t.name for t in tools.available(ctx)]
    assert {"time__get_current_time", "time__convert_time"} <= set(names)
    definition = tools.get("time__get_current_time").definition["function"]
    assert definition["parameters"]["required"] == ["timezone"]
    outcome = await call(tools, ctx, "time__get_current_time", {"timezone": "UTC"})
    assert outcome.ok and outcome.value["timezone"] == "UTC" and "datetime" in outcome.value


async def test_stdio_server_gets_the_project_root_in_its_arguments_not_as_its_cwd(pool, root):
    """{project_root} is replaced; the working directory is an empty one of the session's
    own, outside the root, removed once the session ends; one process is reused."""
    server = await sync_to_async(edge_server)(env={"EDGE_TOKEN": "stored"})
    tools, ctx = await turn_tools(root, link(server))

    where = await call(tools, ctx, "edge__where")
    assert where.ok
    cwd = Path(json.loads(where.value)["cwd"])
    assert cwd.name.startswith("rojo-mcp-") and not cwd.is_relative_to(root.parent)
    assert f"{root}/edge.pid" in where.value
    assert '"token": "stored"' in where.value
    first = pool.connection(ServerSpec.of(server), root).pid
    await call(tools, ctx, "edge__echo", {"text": "again"})
    assert pool.connection(ServerSpec.of(server), root).pid == first
    assert int((root / "edge.pid").read_text()) == first
    await mcp_pool_close()
    assert not await asyncio.to_thread(cwd.exists)


async def test_results_convert_faithfully(pool, root):
    """Text joined, images described with their size, isError a failure with its text."""
    server = await sync_to_async(edge_server)()
    tools, ctx = await turn_tools(root, link(server))

    assert (await call(tools, ctx, "edge__echo", {"text": "hi", "times": 2})).value == "hi hi"
    picture = await call(tools, ctx, "edge__picture")
    assert picture.value == "a picture\n[image image/png, 100 bytes]"
    failed = await call(tools, ctx, "edge__fail")
    assert not failed.ok and "the disk is on fire" in failed.error
    huge = await call(tools, ctx, "edge__huge", {"size": 900_000})
    assert huge.ok and huge.value == "x" * 900_000


async def test_a_result_over_the_kept_limit_is_cut_with_a_note(pool, root, settings):
    """What is kept of one result is at most ROJO_MAX_KEPT_RESULT_BYTES, then a note
    saying how much was left out (past ROJO_MAX_READ_BYTES the runner pages it)."""
    settings.ROJO_MAX_READ_BYTES = 1000
    server = await sync_to_async(edge_server)()
    tools, ctx = await turn_tools(root, link(server))
    whole = await call(tools, ctx, "edge__huge", {"size": 50_000})
    assert whole.ok and whole.value == "x" * 50_000  # over the read limit: paged, not cut

    settings.ROJO_MAX_KEPT_RESULT_BYTES = 1000
    huge = await call(tools, ctx, "edge__huge", {"size": 50_000})
    assert huge.ok and huge.value.startswith("x" * 1000 + "\n[… 49,000 more bytes")
    assert "over ROJO_MAX_KEPT_RESULT_BYTES (1,000 bytes)" in huge.value and len(huge.value) < 1200


async def test_a_servers_tool_list_is_bounded_in_count_and_description(pool, root):
    """A server listing 150 more tools with 5,000-character descriptions: the turn gets
    the first 128 of its tools, each description cut to 2,048 characters with a note."""
    server = await sync_to_async(edge_server)(env={"EDGE_EXTRA_TOOLS": "150"})
    tools, ctx = await turn_tools(root, link(server))

    offered = [tool for tool in tools.available(ctx) if tool.name.startswith("edge__")]
    assert len(offered) == 128
    extra = tools.get("edge__extra_0")
    assert "description cut" in extra.description and len(extra.description) < 2300


def test_a_tool_with_a_huge_schema_is_left_out():
    """A schema over 16 KiB leaves its tool out of the session's list; the others stay."""
    import mcp_types as types

    from rojos.mcp.bounds import tools_bounded

    big = {"type": "object", "properties": {f"p{n}": {"type": "string"} for n in range(2000)}}
    listed = [
        types.Tool(name="big", input_schema=big),
        types.Tool(name="small", input_schema={"type": "object"}),
    ]
    assert [tool.name for tool in tools_bounded(listed, "edge")] == ["small"]


def test_a_tool_that_runs_only_as_a_task_is_left_out():
    """A tool whose `execution.taskSupport` is "required" cannot run without MCP's tasks,
    which the client does not start (the reference server answers every plain call to one
    with an error): it is never offered. "optional" and unset tools stay."""
    import mcp_types as types

    from rojos.mcp.bounds import tools_bounded

    plain = {"type": "object"}
    listed = [
        types.Tool(name="research", input_schema=plain, execution={"taskSupport": "required"}),
        types.Tool(name="either", input_schema=plain, execution={"taskSupport": "optional"}),
        types.Tool(name="never", input_schema=plain, execution={"taskSupport": "forbidden"}),
        types.Tool(name="plain", input_schema=plain),
    ]
    assert [tool.name for tool in tools_bounded(listed, "edge")] == ["either", "never", "plain"]


async def test_a_crash_mid_call_is_a_tool_error_and_the_server_starts_again(pool, root):
    server = await sync_to_async(edge_server)()
    tools, ctx = await turn_tools(root, link(server))
    first = int((root / "edge.pid").read_text())

    crashed = await call(tools, ctx, "edge__crash")
    assert not crashed.ok and "stopped during the call" in crashed.error
    assert await asyncio.to_thread(wait_gone, first)
    again = await call(tools, ctx, "edge__echo", {"text": "back"})
    assert again.ok and again.value == "back"
    assert int((root / "edge.pid").read_text()) != first


async def test_a_hanging_call_times_out_as_a_tool_error(pool, root, settings):
    settings.ROJO_MCP_CALL_TIMEOUT = 1
    server = await sync_to_async(edge_server)()
    tools, ctx = await turn_tools(root, link(server))

    first = int((root / "edge.pid").read_text())
    hung = await call(tools, ctx, "edge__hang")
    assert not hung.ok and "did not answer within 1 s" in hung.error
    assert await asyncio.to_thread(wait_gone, first)  # not left wedged: started again
    assert (await call(tools, ctx, "edge__echo", {"text": "still here"})).ok
    assert int((root / "edge.pid").read_text()) != first


async def test_an_answer_that_is_not_mcp_is_a_tool_error(pool, root, caplog):
    """A line that is not JSON is logged; a result of the wrong shape fails the call with
    a tool error, and the session goes on."""
    server = await sync_to_async(edge_server)()
    tools, ctx = await turn_tools(root, link(server))

    garbled = await call(tools, ctx, "edge__garbage")
    assert not garbled.ok and "not valid MCP" in garbled.error
    await asyncio.sleep(0.7)  # the real answer comes late, and is dropped
    assert (await call(tools, ctx, "edge__echo", {"text": "fine"})).value == "fine"
    assert "sent something unreadable" in caplog.text


async def test_a_program_that_speaks_no_mcp_gives_a_tool_error_in_time(pool, root, settings):
    """It answers every line with nonsense: the start gives up after
    ROJO_MCP_START_TIMEOUT, and the model reads why."""
    settings.ROJO_MCP_START_TIMEOUT = 2
    starts = root.parent / "starts.txt"
    nonsense = f"import sys\nopen({str(starts)!r}, 'a').write('start\\n')\n"
    nonsense += "for line in sys.stdin:\n    print('nonsense', flush=True)"
    server = await sync_to_async(edge_server)(args=["-c", nonsense])
    listed = ({"name": "echo", "inputSchema": {"type": "object"}},)
    tools, ctx = await turn_tools(root, McpLink(ServerSpec.of(server), None, True, listed))

    outcome = await call(tools, ctx, "edge__echo", {"text": "x"})
    assert not outcome.ok and "did not answer within 2 s of starting" in outcome.error
    assert starts.read_text() == "start\n"  # the failure is remembered: started once


async def test_a_server_that_cannot_start_gives_a_readable_tool_error(pool, root):
    """A missing command: no tools listed live, the admin's last listing offered, and a
    call says why it failed."""
    server = await sync_to_async(edge_server)(
        command="/nonexistent/mcp-server", listed_tools=[{"name": "echo", "inputSchema": {}}]
    )
    listed = tuple(server.listed_tools)
    down = McpLink(spec=ServerSpec.of(server), tools=None, ask_before=True, listed=listed)
    tools, ctx = await turn_tools(root, down)

    outcome = await call(tools, ctx, "edge__echo", {"text": "x"})
    assert not outcome.ok
    assert "could not be started" in outcome.error and "not found" in outcome.error


async def test_tool_list_is_refreshed_on_list_changed(pool, root):
    """A server's notifications/tools/list_changed makes the next step list them again."""
    server = await sync_to_async(edge_server)()
    tools, ctx = await turn_tools(root, link(server))
    assert "edge__fresh" not in tools.names()

    assert (await call(tools, ctx, "edge__add_tool", {"name": "fresh"})).ok
    for _ in range(50):
        await tools.prepare(ctx)
        if "edge__fresh" in tools.names():
            break
        await asyncio.sleep(0.1)
    assert (await call(tools, ctx, "edge__fresh")).value == "I am fresh"


async def test_chosen_tools_and_viewers_get_only_read_only_tools(pool, root):
    server = await sync_to_async(edge_server)()
    chosen, ctx = await turn_tools(root, link(server, tools=frozenset({"echo", "write_note"})))
    assert {t.name for t in chosen.available(ctx)} - set(registry.names()) == {
        "edge__echo",
        "edge__write_note",
    }
    viewer_tools, viewer = await turn_tools(root, link(server), role=Role.VIEWER)
    mcp_names = {t.name for t in viewer_tools.available(viewer)} - set(registry.names())
    assert "edge__echo" in mcp_names and "edge__write_note" not in mcp_names
    refused = await call(viewer_tools, viewer, "edge__write_note", {"name": "n", "text": "t"})
    assert not refused.ok and "read-only" in refused.error
    assert not (root / "n").exists()


async def test_idle_sessions_stop_their_server(pool, root, settings):
    settings.ROJO_MCP_IDLE_SECONDS = 0.5
    server = await sync_to_async(edge_server)()
    await turn_tools(root, link(server))
    pid = int((root / "edge.pid").read_text())

    assert await asyncio.to_thread(wait_gone, pid, 10)
    assert pid not in exit_hook.running()


async def test_a_call_as_an_idle_session_ends_starts_the_server_again(pool, root, settings):
    """A call that comes while an idle session is still ending (its server not yet gone)
    waits for that end and starts the server again: it used to be sent on the ending
    session and fail as "stopped during the call" (a turn waiting on an approval longer
    than ROJO_MCP_IDLE_SECONDS)."""
    settings.ROJO_MCP_IDLE_SECONDS = 0.3
    server = await sync_to_async(edge_server)()
    tools, ctx = await turn_tools(root, link(server))
    first = pool.connection(ServerSpec.of(server), root).pid
    idle_stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    class Stopped(logging.Handler):
        def emit(self, record):
            if "idle for" in record.getMessage():
                loop.call_soon_threadsafe(idle_stop.set)

    handler = Stopped()
    logging.getLogger("rojos.mcp").addHandler(handler)
    try:
        await asyncio.wait_for(idle_stop.wait(), 10)
        outcome = await call(tools, ctx, "edge__echo", {"text": "again"})
    finally:
        logging.getLogger("rojos.mcp").removeHandler(handler)

    assert outcome.ok, outcome
    assert outcome.value == "again"
    assert pool.connection(ServerSpec.of(server), root).pid != first


async def test_closing_the_pool_leaves_no_stdio_server_running(root):
    server = await sync_to_async(edge_server)()
    await turn_tools(root, link(server))
    pid = int((root / "edge.pid").read_text())

    await mcp_pool_close()
    assert await asyncio.to_thread(wait_gone, pid, 5)


async def test_streamable_http_server_with_headers_from_the_environment(
    pool, root, tmp_path, monkeypatch
):
    """The same tools over streamable HTTP; a header named by an environment variable is
    sent; a crash of the HTTP server is a tool error, and a server that is down too."""
    http = await asyncio.to_thread(HttpEdge, tmp_path / "http-edge.log")
    try:
        monkeypatch.setenv("EDGE_AUTH", "Bearer secret")
        server = await sync_to_async(edge_server)(
            transport="http",
            command="",
            args=[],
            url=http.url,
            headers_from={"Authorization": "EDGE_AUTH"},
        )
        tools, ctx = await turn_tools(root, link(server))
        assert (await call(tools, ctx, "edge__echo", {"text": "over http"})).value == "over http"
        assert not (await call(tools, ctx, "edge__fail")).ok
        assert (await call(tools, ctx, "edge__add_tool", {"name": "fresh"})).ok
        for _ in range(50):
            await tools.prepare(ctx)
            if "edge__fresh" in tools.names():
                break
            await asyncio.sleep(0.1)
        assert "edge__fresh" in tools.names()
        crashed = await call(tools, ctx, "edge__crash")
        assert not crashed.ok
    finally:
        await asyncio.to_thread(http.stop)
    down = await call(tools, ctx, "edge__echo", {"text": "anyone?"})
    assert not down.ok and "Edge" in down.error


EXIT_SCRIPT = """
import asyncio, sys, threading
from pathlib import Path
import django
django.setup()
from rojos.mcp.pool import mcp_pool
from rojos.mcp.spec import ServerSpec

root = Path(sys.argv[1])
spec = ServerSpec(slug="edge", name="Edge", transport="stdio", command=sys.executable,
                  args=(sys.argv[2], "{project_root}/edge.pid"), env=(("EDGE_LINGER", "1"),))
started = threading.Event()

async def use():
    await mcp_pool().connection(spec, root).tools()
    started.set()
    await asyncio.sleep(3600)

# A loop on a daemon thread, never closed: only the exit hook can stop the server.
threading.Thread(target=asyncio.run, args=(use(),), daemon=True).start()
started.wait(60)
print(Path(root, "edge.pid").read_text(), flush=True)
"""


def test_the_exit_hook_stops_servers_a_process_left_running(root):
    """A process exits with a session still open on a loop nobody closes, and its server
    does not exit at the end of its stdin: the exit hook stops it."""
    import os
    import subprocess
    import sys

    from tests.support.mcp_helpers import EDGE

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "roject.settings", "DEBUG": "1"}
    done = subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT, str(root), EDGE],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=True,
    )
    pid = int(done.stdout.strip())
    assert wait_gone(pid, 10)


async def test_a_failing_servers_error_names_it_but_not_its_url(pool, root, tmp_path):
    """The URL of a streamable HTTP server may hold a key: the tool error of a server that
    cannot be reached, or answers the wrong path, names the server, never the URL."""
    http = await asyncio.to_thread(HttpEdge, tmp_path / "http-edge.log")
    try:
        errors = []
        for slug, url in (
            ("down", "http://127.0.0.1:9/mcp?api_key=SECRET-KEY-123"),
            ("wrong", http.url.replace("/mcp", "/nope") + "?api_key=SECRET-KEY-123"),
        ):
            server = await sync_to_async(McpServer.objects.create)(
                name=slug.title(), slug=slug, transport="http", url=url,
                listed_tools=[{"name": "echo", "inputSchema": {}}],
            )  # fmt: skip
            listed = tuple(server.listed_tools)
            down = McpLink(spec=ServerSpec.of(server), tools=None, ask_before=False, listed=listed)
            tools, ctx = await turn_tools(root, down)
            outcome = await call(tools, ctx, f"{slug}__echo", {})
            assert not outcome.ok and f"{slug.title()!r}" in outcome.error
            errors.append(outcome.error)
    finally:
        await asyncio.to_thread(http.stop)
    for error in errors:
        assert "SECRET-KEY-123" not in error and "127.0.0.1" not in error, error


async def test_a_servers_error_quoting_its_key_shows_no_part_of_it(pool, root, tmp_path, caplog):
    """A server that refuses the key the admin gave it (a stored variable over stdio, a
    stored header over HTTP) and quotes it, whole or masked, in an isError result or an MCP
    error: the tool's error, which members see and the model's provider is sent, holds none
    of it; nor does our log of the stdio server's stderr, where it prints the failure."""
    caplog.set_level("INFO", logger="rojos.mcp")
    key = "edge-Kx93Tq7Lm2Vw8Zp4"
    stdio = await sync_to_async(edge_server)(env={"EDGE_TOKEN": key})
    http = await asyncio.to_thread(HttpEdge, tmp_path / "http-edge.log")
    try:
        remote = await sync_to_async(edge_server)(
            slug="remote", transport="http", command="", args=[], url=http.url,
            headers={"X-Api-Key": key},
        )  # fmt: skip
        tools, ctx = await turn_tools(root, link(stdio), link(remote))
        errors = []
        for slug in ("edge", "remote"):
            for protocol in (False, True):
                outcome = await call(tools, ctx, f"{slug}__refuse_key", {"protocol": protocol})
                assert not outcome.ok and "invalid key ***" in outcome.error, outcome.error
                errors.append(outcome.error)
        for _ in range(100):  # the stderr pipe's thread logs the server's line when it comes
            if "MCP server edge:" in caplog.text and "refuse_key" in caplog.text:
                break
            await asyncio.sleep(0.05)
        assert "refuse_key" in caplog.text
    finally:
        await asyncio.to_thread(http.stop)
    for error in [*errors, caplog.text]:
        assert key not in error and key[-4:] not in error, error


def test_a_start_failure_message_never_holds_the_url():
    """Whatever the error (a transport error, a refusal quoting the URL, any other), the
    message of a failed start names the server and leaves its URL out."""
    import httpx2
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    from rojos.mcp.transport import start_failure

    url = "https://mcp.example.com/mcp?api_key=SECRET-KEY-123"
    spec = ServerSpec(slug="t", name="Tracker", transport="http", url=url)
    for exc in (
        httpx2.ConnectError(f"cannot connect to {url}"),
        MCPError(code=types.INTERNAL_ERROR, message=f"refused at {url.split('?')[0]}"),
        RuntimeError(f"bad answer from {url}"),
    ):
        message = start_failure(spec, exc)
        assert "'Tracker'" in message and "mcp.example.com" not in message, message


def test_a_failed_sign_in_is_told_from_inside_the_sdks_task_group():
    """The SDK's transport wraps a failed OAuth sign-in in an exception group: the message
    says the sign-in failed, and leaves out the URL the error quotes."""
    from mcp.client.auth import OAuthFlowError

    from rojos.mcp.transport import start_failure

    url = "https://mcp.example.com/mcp"
    spec = ServerSpec(slug="t", name="Tracker", transport="http", url=url)
    failed = ExceptionGroup("errors", [OAuthFlowError(f"issuer mismatch for {url}")])
    message = start_failure(spec, failed)
    assert message == (
        "the MCP server 'Tracker' could not be started: signing in to it failed (OAuthFlowError)"
    )
