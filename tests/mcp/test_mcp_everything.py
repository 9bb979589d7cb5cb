"""Rojo's MCP client against a server that is not ours: the reference server
`@modelcontextprotocol/server-everything` (npm, EVERYTHING in tests/support/npx_packages.py),
registered as an admin would, over stdio and over streamable HTTP, its tools called in a
real turn with the fake provider scripting the calls. For each kind of result it sends
(text beside an image, an embedded resource, resource links, structured content,
annotations, a long call with progress, a large answer, a question to the person) the model
is sent words it can use, the chat shows the call and its result, and the history is kept.
"""

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2
import pytest

from roject.storage import project_root_create
from rojos.models import McpServer, Message, RojoMcpServer
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import assert_history_valid, make_rojo, stored_history
from tests.support.live_server import parse_sse, read_until
from tests.support.npx_packages import EVERYTHING, npx_installed

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="session")
def everything() -> list[str]:
    """The command that runs the reference server, fetched once per session."""
    return npx_installed(EVERYTHING, "--version", says="Everything Server")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def everything_over_http(command: list[str], log) -> Iterator[str]:
    """The reference server's streamable HTTP transport on a free port: its URL."""
    port = _free_port()
    process = subprocess.Popen(
        [*command, "streamableHttp"],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "PORT": str(port)},
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 90  # a start, on a loaded machine
        while True:
            try:
                httpx2.get(url, timeout=1)
                break
            except httpx2.TransportError:
                assert time.monotonic() < deadline and process.poll() is None, "no HTTP server"
                time.sleep(0.2)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@contextmanager
def registered(command: list[str], transport: str, tmp_path) -> Iterator[McpServer]:
    """The reference server as an admin registers it: a trusted stdio command, or a URL."""
    if transport == "stdio":
        yield McpServer.objects.create(
            name="Everything", slug="everything", transport="stdio", trusted=True,
            command=command[0], args=[*command[1:], "stdio"],
        )  # fmt: skip
        return
    with open(tmp_path / "everything.log", "w") as log, everything_over_http(command, log) as url:
        yield McpServer.objects.create(
            name="Everything", slug="everything", transport="http", trusted=True, url=url
        )


def _turn(project, fake_provider, settings, server, calls) -> None:
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_MCP_IDLE_SECONDS = 2  # the server stops soon after the test
    project_root_create(project.pk)
    rojo = make_rojo(fake_provider.base_url)
    RojoMcpServer.objects.create(rojo=rojo, server=server, ask_before=False)
    fake_provider.add(stream(*tool_call_chunks(calls)), stream(*text_chunks("Done.")))


def _sent_back(request: dict) -> dict[str, str]:
    """What the model was sent of each call's result, by the tool's name."""
    names = {}
    for message in request["messages"]:
        for call in message.get("tool_calls") or ():
            names[call["id"]] = call["function"]["name"]
    return {
        names[m["tool_call_id"]]: m["content"] for m in request["messages"] if m["role"] == "tool"
    }


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_reference_servers_results_reach_the_model_and_the_chat(
    everything, transport, client_for, users, project, fake_provider, settings, tmp_path
):
    settings.ROJO_MAX_READ_BYTES = 20_000  # the long echo below is paged
    calls = [
        ("everything__get-tiny-image", {}),
        ("everything__get-structured-content", {"location": "Chicago"}),
        ("everything__get-resource-links", {"count": 2}),
        ("everything__get-resource-reference", {"resourceType": "Text", "resourceId": 2}),
        ("everything__get-annotated-message", {"messageType": "error", "includeImage": True}),
        ("everything__trigger-long-running-operation", {"duration": 1, "steps": 3}),
        ("everything__echo", {"message": "long " * 6000}),
    ]
    with registered(everything, transport, tmp_path) as server:
        _turn(project, fake_provider, settings, server, calls)
        events = client_for(users["editor"]).chat(project.pk, rojo="test-rojo", message="Go")

    kinds = [e.type for e in events]
    assert kinds[-1] == "DONE" and "ERROR" not in kinds, events[-3:]
    shown = {e.data["name"]: e.data for e in events if e.type == "TOOL_RESULT"}
    assert set(shown) == {name for name, _ in calls}
    assert all(r["ok"] for r in shown.values()), shown
    assert all(r["mcp"] == {"server": "Everything", "undoable": False} for r in shown.values())

    offered = {tool["function"]["name"] for tool in fake_provider.requests[0]["tools"]}
    assert {name for name, _ in calls} <= offered
    # Runs only as an MCP task, which Rojo does not start; sampling is not offered to servers.
    assert "everything__simulate-research-query" not in offered
    assert "everything__trigger-sampling-request" not in offered

    sent = _sent_back(fake_provider.requests[1])
    image = sent["everything__get-tiny-image"]
    assert "[image image/png, " in image and "iVBORw0KGgo" not in image
    assert '"conditions"' in sent["everything__get-structured-content"]
    links = sent["everything__get-resource-links"]
    assert links.count("[resource link demo://resource/") == 2
    embedded = sent["everything__get-resource-reference"]
    assert "[resource demo://resource/dynamic/text/2 (text/plain, " in embedded
    assert "Resource 2: This is a plaintext resource" in embedded
    assert "Error: Operation failed" in sent["everything__get-annotated-message"]
    assert "Long running operation completed" in sent["everything__trigger-long-running-operation"]
    long = sent["everything__echo"]
    assert "read_result" in long and len(long) < 25_000, long[:500]

    history = stored_history(events[0].data["conversation"])
    assert_history_valid(history)
    assert sum(m.role == Message.Role.TOOL for m in history) == len(calls)


def test_the_reference_servers_form_is_answered_by_the_person(
    everything, client_for, users, project, fake_provider, settings, tmp_path
):
    """Its form has every kind of field the 2025-11-25 specification names, choices of
    several values among them: the person's answer reaches the server as sent, each field
    left out filled with the schema's default."""
    with registered(everything, "stdio", tmp_path) as server:
        _turn(
            project,
            fake_provider,
            settings,
            server,
            [("everything__trigger-elicitation-request", {})],
        )
        editor = client_for(users["editor"])
        with editor.chat_stream(project.pk, rojo="test-rojo", message="Ask me") as response:
            events = parse_sse(response.iter_lines())
            seen = read_until(events, "QUESTION")
            conversation, question = seen[0].data["conversation"], seen[-1].data
            content = {
                "name": "Ada",
                "check": True,
                "untitledMultipleSelectEnum": ["Piano", "Bass"],
            }
            sent = editor.post(
                f"/api/conversations/{conversation}/answer",
                json={"question": question["id"], "action": "accept", "content": content},
            )
            assert sent.status_code == 200, sent.text
            rest = list(events)

    fields = question["schema"]["properties"]
    assert fields["untitledMultipleSelectEnum"]["type"] == "array"
    [result] = [e.data for e in rest if e.type == "TOOL_RESULT"]
    assert result["ok"], result
    said = result["result"]["result"] if isinstance(result["result"], dict) else result["result"]
    assert "- Name: Ada" in said and "- Favorite Integer: 42" in said
    assert '"Piano"' in said and '"fish-1"' in said  # the server's raw echo of the answer
    stored = Message.objects.get(conversation_id=conversation, role=Message.Role.TOOL)
    [kept] = stored.extra["questions"]
    assert kept["answer"]["content"]["untitledMultipleSelectEnum"] == ["Piano", "Bass"]


def test_the_reference_servers_progress_reaches_the_stream_in_order(
    everything, client_for, users, project, fake_provider, settings, tmp_path
):
    """Its long-running tool, called with a progressToken, reports each step: TOOL_PROGRESS
    events for the call, in order, the last before its result; a page that re-attaches while
    it runs gets them from the turn's log; the stored history has none and is valid."""
    settings.ROJO_MCP_CALL_TIMEOUT = 1.5  # shorter than the call: its reports keep it going
    steps = 6
    calls = [("everything__trigger-long-running-operation", {"duration": 3, "steps": steps})]
    with registered(everything, "stdio", tmp_path) as server:
        _turn(project, fake_provider, settings, server, calls)
        with client_for(users["editor"]).chat_stream(
            project.pk, rojo="test-rojo", message="Go"
        ) as response:
            live = parse_sse(response.iter_lines())
            seen = read_until(live, "TOOL_PROGRESS")
            conversation = seen[0].data["conversation"]
            with client_for(users["editor"]).http.stream(
                "GET",
                f"/api/conversations/{conversation}/stream",
                headers={"Last-Event-ID": "0"},
                timeout=40,
            ) as again:
                replayed = read_until(parse_sse(again.iter_lines()), "TOOL_RESULT")
            events = seen + list(live)

    kinds = [e.type for e in events]
    assert kinds[-1] == "DONE" and "ERROR" not in kinds, events[-3:]
    call_id = next(e.data["id"] for e in events if e.type == "TOOL_CALL")
    progress = [e.data for e in events if e.type == "TOOL_PROGRESS"]
    assert progress and all(p["id"] == call_id for p in progress)
    amounts = [p["progress"] for p in progress]
    assert amounts == sorted(set(amounts)) and amounts[-1] == steps, progress
    assert all(p["total"] == steps for p in progress), progress
    assert kinds.index("TOOL_RESULT") > max(i for i, k in enumerate(kinds) if k == "TOOL_PROGRESS")
    result = next(e.data for e in events if e.type == "TOOL_RESULT")
    assert result["ok"] and "Long running operation completed" in str(result["result"])

    again_progress = [e.data for e in replayed if e.type == "TOOL_PROGRESS"]
    assert again_progress and again_progress[-1]["progress"] == steps

    history = stored_history(conversation)
    assert_history_valid(history)
    assert "TOOL_PROGRESS" not in repr([(m.content, m.tool_calls) for m in history])
