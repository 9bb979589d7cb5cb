"""TOOL_CALL_DELTA: a tool call is shown while the model still writes it, throttled per call,
through the real agent loop against the fake provider over HTTP."""

import json
import time

import pytest

from rojos.agent.events import ToolCallDeltaEvent, ToolCallEvent
from tests.support.agent_run import rojo_for, run_turn
from tests.support.fake_provider import Pause, chunk, stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo, run

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "".join(f"line {n}: some words of the page\n" for n in range(60))


@pytest.fixture
def deltas_on(settings):
    settings.ROJO_TOOL_DELTA_SECONDS = 0.05
    return settings


def deltas_of(run) -> list[ToolCallDeltaEvent]:
    return [e for e in run.events if isinstance(e, ToolCallDeltaEvent)]


async def test_a_slow_write_is_shown_with_its_path_and_text_before_its_call_ends(
    fake_provider, project, users, deltas_on
):
    """Against a paced provider, deltas come before TOOL_CALL: the name first, then the path
    once it arrived, a growing size, and the text being written (a prefix of the whole)."""
    args = {"path": "docs/page.md", "text": TEXT}
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", args)]), delay=0.004),
        stream(*text_chunks("Done.")),
    )
    rojo = await rojo_for(fake_provider)
    run = await run_turn(project=project, rojo=rojo, user=users["editor"])
    deltas = deltas_of(run)
    call_at = run.events.index(run.calls[0])
    assert deltas and all(run.events.index(d) < call_at for d in deltas)
    assert {d.name for d in deltas} == {"write_text_content"}
    assert {d.index for d in deltas} == {0}
    assert [d.chars for d in deltas] == sorted(d.chars for d in deltas)
    assert deltas[0].chars < len(json.dumps(args))  # shown before the arguments ended
    assert any(d.path == "docs/page.md" for d in deltas)
    written = "".join(d.text for d in deltas)
    assert written and TEXT.startswith(written)
    assert deltas[0].id == run.calls[0].id  # the page matches the call by id
    assert len(deltas) <= run.times[call_at] / 0.05 + 2  # at most one per interval


async def test_a_megabyte_argument_makes_a_few_events_not_one_per_chunk(
    fake_provider, project, users, deltas_on
):
    """A 1 MB write in 10,000 chunks yields deltas no more often than the interval allows."""
    big = "x" * 1_000_000
    head = {"index": 0, "id": "call_big", "type": "function"}
    first = {
        **head,
        "function": {"name": "write_text_content", "arguments": '{"path": "big.txt", "text": "'},
    }
    pieces = [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": big[i : i + 100]}}]})
        for i in range(0, len(big), 100)
    ]
    end = chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"}'}}]})
    fake_provider.add(
        stream(
            chunk({"role": "assistant", "tool_calls": [first]}),
            *pieces,
            end,
            chunk({}, "tool_calls"),
        ),
        stream(*text_chunks("Done.")),
    )
    rojo = await rojo_for(fake_provider)
    run = await run_turn(project=project, rojo=rojo, user=users["editor"])
    deltas = deltas_of(run)
    call_at = run.events.index(run.calls[0])
    assert len(deltas) <= run.times[call_at] / 0.05 + 2
    assert len(deltas) < 500
    assert len("".join(d.text for d in deltas)) <= len(big)
    assert run.results[0].ok


async def test_what_arrived_before_a_pause_is_shown_during_it(
    fake_provider, project, users, deltas_on, monkeypatch
):
    """The provider sends the name and path, then nothing for 3 s: the delta comes
    during the pause, not when the stream resumes."""
    from tests.support.fake_provider import _Handler

    written: list[float] = []  # when the provider wrote each chunk (time.monotonic())
    write_chunk = _Handler._write_chunk

    def timed(handler, text):
        written.append(time.monotonic())
        write_chunk(handler, text)

    monkeypatch.setattr(_Handler, "_write_chunk", timed)
    args = json.dumps({"path": "notes.txt", "text": "hello"})
    start = {"index": 0, "id": "call_p", "type": "function"}
    fake_provider.add(
        stream(
            chunk(
                {
                    "tool_calls": [
                        {
                            **start,
                            "function": {"name": "write_text_content", "arguments": args[:25]},
                        }
                    ]
                }
            ),
            Pause(3),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[25:]}}]}),
            chunk({}, "tool_calls"),
        ),
        stream(*text_chunks("Done.")),
    )
    rojo = await rojo_for(fake_provider)
    run = await run_turn(project=project, rojo=rojo, user=users["editor"])
    deltas = deltas_of(run)
    assert deltas[0].path == "notes.txt" and deltas[0].name == "write_text_content"
    resumed = written[1]  # the first chunk, the pause, then the rest of the arguments
    assert run.started + run.times[run.events.index(deltas[0])] < resumed


async def test_parallel_calls_interleaved_by_index_are_shown_apart(
    fake_provider, project, users, deltas_on
):
    """Two calls whose fragments interleave (by index) each get their own deltas."""
    a = json.dumps({"path": "a.txt", "text": "alpha " * 30})
    b = json.dumps({"path": "b.txt", "text": "beta " * 30})
    chunks = [
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "write_text_content", "arguments": ""},
                    }
                ]
            }
        ),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "write_text_content", "arguments": ""},
                    }
                ]
            }
        ),
    ]
    for i in range(0, max(len(a), len(b)), 8):
        chunks.append(
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": a[i : i + 8]}}]})
        )
        chunks.append(
            chunk({"tool_calls": [{"index": 1, "function": {"arguments": b[i : i + 8]}}]})
        )
    chunks.append(chunk({}, "tool_calls"))
    fake_provider.add(stream(*chunks, delay=0.003), stream(*text_chunks("Done.")))
    rojo = await rojo_for(fake_provider)
    run = await run_turn(project=project, rojo=rojo, user=users["editor"])
    deltas = deltas_of(run)
    by_index = {d.index: d for d in deltas if d.path}
    assert by_index[0].path == "a.txt" and by_index[0].id == "call_a"
    assert by_index[1].path == "b.txt" and by_index[1].id == "call_b"
    assert "beta" not in "".join(d.text for d in deltas if d.index == 0)


async def test_a_call_without_an_id_gets_one_more_delta_with_the_id_it_is_run_under(
    fake_provider, project, users, deltas_on
):
    """A provider that sends no id (Gemini): the delta after the response names the id the
    call's TOOL_CALL carries, so the page can match them."""
    chunks = tool_call_chunks(
        [("write_text_content", {"path": "g.txt", "text": "gemini " * 40})], ids="none"
    )
    fake_provider.add(stream(*chunks, delay=0.004), stream(*text_chunks("Done.")))
    rojo = await rojo_for(fake_provider)
    run = await run_turn(project=project, rojo=rojo, user=users["editor"])
    deltas = deltas_of(run)
    assert deltas[0].id == ""
    call = next(e for e in run.events if isinstance(e, ToolCallEvent))
    assert deltas[-1].id == call.id and call.id.startswith("call_")
    assert run.events.index(deltas[-1]) < run.events.index(call)


async def test_a_fast_call_makes_no_delta(fake_provider, project, users, deltas_on):
    """A call that streams in faster than the interval is announced by TOOL_CALL alone."""
    deltas_on.ROJO_TOOL_DELTA_SECONDS = 5
    fake_provider.add(
        stream(*tool_call_chunks([("list_files", {"path": ""})])), stream(*text_chunks("Done."))
    )
    rojo = await rojo_for(fake_provider)
    run = await run_turn(project=project, rojo=rojo, user=users["editor"])
    assert run.kinds == ["tool_call", "tool_result", "text"]


def slow_write_replies():
    args = {"path": "docs/slow.md", "text": TEXT}
    return (
        stream(*tool_call_chunks([("write_text_content", args)]), delay=0.004),
        stream(*text_chunks("Done.")),
    )


def test_chat_command_ndjson_prints_the_deltas(project, fake_provider, deltas_on):
    """`chat --format ndjson` prints TOOL_CALL_DELTA lines as the endpoint streams them,
    before the call's TOOL_CALL (the text format leaves them out)."""
    make_rojo(fake_provider.base_url, approval_tools=[])
    fake_provider.add(*slow_write_replies())
    out = run(
        "chat", "Write", project="demo-project", rojo="test-rojo", user="editor", format="ndjson"
    )
    events = [json.loads(line) for line in out.splitlines()]
    types = [e["type"] for e in events]
    assert "TOOL_CALL_DELTA" in types
    assert types.index("TOOL_CALL_DELTA") < types.index("TOOL_CALL")
    delta = next(e for e in events if e["type"] == "TOOL_CALL_DELTA" and "path" in e)
    assert delta["path"] == "docs/slow.md" and delta["name"] == "write_text_content"


def test_the_chat_endpoint_streams_deltas_as_ndjson(
    client_for, users, project, fake_provider, deltas_on
):
    """Over the chat endpoint's NDJSON, the deltas come as lines of their own."""
    rojo = make_rojo(fake_provider.base_url, approval_tools=[])
    fake_provider.add(*slow_write_replies())
    client = client_for(users["editor"])
    with client.http.stream(
        "POST",
        f"/api/projects/{project.pk}/chat",
        json={"rojo": rojo.slug, "message": "Write"},
        headers={"Accept": "application/x-ndjson"},
    ) as response:
        events = [json.loads(line) for line in response.iter_lines() if line]
    deltas = [e for e in events if e["type"] == "TOOL_CALL_DELTA"]
    assert deltas and deltas[0]["name"] == "write_text_content"
    assert any(d.get("path") == "docs/slow.md" for d in deltas)
