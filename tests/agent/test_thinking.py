"""Visible thinking through the real loop over HTTP: each of the three shapes streamed as
REASONING events before the answer, stored with how long it took, rebuilt for replay and the
export, and sent back within the tool loop only where the provider needs it."""

import json
import threading

import pytest
from asgiref.sync import sync_to_async

from rojos.agent.events import ReasoningEvent, SummaryEvent, ToolCallEvent, numbered
from rojos.agent.stored_events import conversation_turns
from rojos.context.window import item_chars
from rojos.conversations.export import conversation_export_markdown
from rojos.models import Rojo
from rojos.models.capabilities import CLOSING_THINK_TAG as CLOSING
from rojos.provider.request import request_messages
from rojos.turns.events import TurnEvents
from tests.support.agent_run import rojo_for, run_turn, valid_history
from tests.support.fake_provider import (
    MODEL,
    REASONING_SHAPES,
    Gate,
    chunk,
    reasoning_chunks,
    stream,
    text_chunks,
    tool_call_chunks,
)
from tests.support.helpers import make_rojo, stored_history
from tests.support.live_server import parse_sse, read_until

pytestmark = pytest.mark.django_db(transaction=True)

PIECES = ["The user wants ", "the root listed; ", "list_files does that."]
THOUGHT = "".join(PIECES)
LIST_ROOT = [("list_files", {"path": ""})]
FIELDS = ("reasoning_content", "reasoning")


def thinking_then_call(shape: str):
    """A step that thinks in `shape`, then lists the root."""
    return stream(*reasoning_chunks(PIECES, shape), tool_call_chunks(LIST_ROOT))


def reasoning_sent(request: dict) -> list[tuple[int, str]]:
    """(message index, field) of every reasoning field a request carried."""
    return [(n, f) for n, m in enumerate(request["messages"]) for f in FIELDS if f in m]


@pytest.mark.parametrize("shape", REASONING_SHAPES)
async def test_thinking_streams_before_the_call_and_is_stored_whole(
    fake_provider, project, users, shape
):
    """The thinking comes as REASONING events, all before the call; the stored reply holds
    it whole (no tags left in its text) and how long it took."""
    fake_provider.add(thinking_then_call(shape), stream(text_chunks("The root is empty.")))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None
    thoughts = [e for e in run.events if isinstance(e, ReasoningEvent)]
    assert "".join(e.text for e in thoughts) == THOUGHT
    assert not any(e.whole for e in thoughts)
    first_call = next(n for n, e in enumerate(run.events) if isinstance(e, ToolCallEvent))
    assert run.events.index(thoughts[-1]) < first_call
    assert run.text == "The root is empty."
    history = await valid_history(run.conversation)
    assert history[1].reasoning == THOUGHT and history[1].content is None
    assert history[1].extra["reasoning_seconds"] >= 0


@pytest.mark.parametrize(
    ("shape", "rule", "field", "kept"),
    [
        ("reasoning", Rojo.ReasoningBack.AUTO, "reasoning", False),  # Ollama's gpt-oss
        ("reasoning_content", Rojo.ReasoningBack.AUTO, "reasoning_content", True),  # DeepSeek
        ("think", Rojo.ReasoningBack.AUTO, None, False),  # the templates drop it themselves
        ("reasoning_content", Rojo.ReasoningBack.TOOL_LOOP, "reasoning_content", False),  # vLLM
        ("think", Rojo.ReasoningBack.TOOL_LOOP, "reasoning_content", False),  # Qwen3, llama.cpp
        ("reasoning_content", Rojo.ReasoningBack.NEVER, None, False),
        ("reasoning", Rojo.ReasoningBack.NEVER, None, False),
    ],
)
async def test_reasoning_goes_back_with_its_calls_only_where_needed(
    fake_provider, project, users, shape, rule, field, kept
):
    """The request after the call carries the thinking in the field the provider takes, or
    nothing; the next turn's request (after a new user message) only where the provider
    needs it in every later request (DeepSeek's thinking mode answers 400 without it)."""
    fake_provider.add(
        thinking_then_call(shape),
        stream(text_chunks("The root is empty.")),
        stream(text_chunks("Still empty.")),
    )
    rojo = await rojo_for(fake_provider, reasoning_back=rule)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])
    await run_turn(project=project, rojo=rojo, user=users["editor"], conversation=run.conversation)

    within, after = fake_provider.requests[1], fake_provider.requests[2]
    assert reasoning_sent(within) == ([(1, field)] if field else [])
    if field:
        assert within["messages"][1][field] == THOUGHT
    assert reasoning_sent(after) == ([(1, field)] if kept else [])
    assert "_reasoning" not in json.dumps(within) + json.dumps(after)  # no mark of ours
    assert "<think>" not in json.dumps(within) and "<think>" not in json.dumps(after)
    if not field:
        assert "the root listed" not in json.dumps(within)


async def test_reasoning_goes_back_only_to_the_model_that_wrote_it(fake_provider, project, users):
    """A tool loop continued by another model (the rojo's changed) does not get it."""
    fake_provider.add(thinking_then_call("reasoning"), stream(text_chunks("Done.")))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    history = await valid_history(run.conversation)
    assert history[1].extra["model"] == rojo.model
    assert request_messages(history, model=rojo.model)[1]["reasoning"] == THOUGHT
    assert "reasoning" not in request_messages(history, model="other-model")[1]


async def test_reasoning_effort_is_sent_where_set_and_request_options_win(
    fake_provider, project, users
):
    fake_provider.add(
        stream(text_chunks("One.")), stream(text_chunks("Two.")), stream(text_chunks("Three."))
    )
    rojo = await rojo_for(fake_provider)
    await run_turn(project=project, rojo=rojo, user=users["editor"])
    rojo.reasoning_effort = Rojo.ReasoningEffort.HIGH
    await run_turn(project=project, rojo=rojo, user=users["editor"])
    rojo.request_options = {"reasoning": {"effort": "low"}}  # OpenRouter's own form
    await run_turn(project=project, rojo=rojo, user=users["editor"])

    plain, effort, own = fake_provider.requests
    assert "reasoning_effort" not in plain
    assert effort["reasoning_effort"] == "high"
    assert "reasoning_effort" not in own and own["reasoning"] == {"effort": "low"}


async def test_stored_thinking_is_replayed_and_exported(fake_provider, project, users):
    """A reopened turn shows the thinking whole, with its seconds, before the call; the
    Markdown export has it folded."""
    fake_provider.add(thinking_then_call("reasoning_content"), stream(text_chunks("Empty.")))
    rojo = await rojo_for(fake_provider)
    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    turns = await sync_to_async(conversation_turns)(run.conversation)
    events = turns[0][1]
    types = [e.type for e in events]
    assert types[:3] == ["START", "REASONING", "TOOL_CALL"]
    data = numbered(1, events[1]).data
    assert data["text"] == THOUGHT and data["whole"] is True and data["seconds"] >= 0
    markdown = await sync_to_async(conversation_export_markdown)(run.conversation)
    assert "<summary>Thought for " in markdown and THOUGHT in markdown


def test_live_thinking_is_kept_as_one_run_and_read_back_chunk_by_chunk():
    """REASONING chunks are kept as CHAT chunks are: one entry for the run, each numbered."""
    events = TurnEvents()
    for piece in PIECES:
        events.append("REASONING", piece)
    events.append("CHAT", "Answer.")
    assert events.entries() == 2
    assert [events.at(n).data["text"] for n in (1, 2, 3)] == PIECES
    assert events.at(2).type == "REASONING" and events.at(4).type == "CHAT"
    assert events.after(0).type == "REASONING"
    assert list(events.others()) == []


async def test_thinking_seen_before_the_stream_broke_is_kept(fake_provider, project, users):
    """A reply cut off while the model thinks keeps the thinking the user saw, stored and
    replayed (an empty reply is not sent back)."""
    fake_provider.add(stream(*reasoning_chunks(PIECES[:2], "reasoning"), cut=True))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is not None and set(run.kinds) == {"reasoning"}
    history = await valid_history(run.conversation)
    assert history[1].reasoning == "".join(PIECES[:2]) and history[1].content is None
    turns = await sync_to_async(conversation_turns)(run.conversation)
    assert [e.type for e in turns[0][1]][1] == "REASONING"


def test_reasoning_sent_back_counts_towards_the_requests_size():
    """What goes back with a call is in the window's estimate, as the provider counts it."""
    call = {"id": "a", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
    bare = {"role": "assistant", "tool_calls": [call]}
    for field in FIELDS:
        assert item_chars({**bare, field: THOUGHT}) == item_chars(bare) + len(THOUGHT)


@pytest.mark.parametrize("shape", REASONING_SHAPES)
async def test_an_empty_think_block_shows_and_stores_no_thinking(
    fake_provider, project, users, shape
):
    """Qwen3 with its thinking switched off still opens its reply with an empty block
    (`<think>\\n\\n</think>`, or the same white space in a reasoning field): no REASONING
    event (the page would fold an empty "Thought for 1 s" line), and nothing stored,
    replayed or sent back as thinking."""
    fake_provider.add(
        stream(*reasoning_chunks(["\n\n"], shape), tool_call_chunks(LIST_ROOT)),
        stream(text_chunks("The root is empty.")),
    )
    rojo = await rojo_for(fake_provider, reasoning_back=Rojo.ReasoningBack.TOOL_LOOP)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None
    assert run.kinds == ["tool_call", "tool_result", "text"]
    history = await valid_history(run.conversation)
    assert history[1].reasoning == "" and "reasoning_seconds" not in history[1].extra
    turns = await sync_to_async(conversation_turns)(run.conversation)
    assert "REASONING" not in [e.type for e in turns[0][1]]
    assert reasoning_sent(fake_provider.requests[1]) == []


async def test_a_summary_by_a_model_thinking_from_its_prompt_holds_its_answer_only(
    fake_provider, project, users
):
    """A model whose thinking opens in its prompt (the self-test's "closing think tag")
    summarises the oldest turns as it answers: thinking, `</think>`, then the summary. The
    stored summary, and what later requests send of it, is the summary alone, not the
    thinking (which could fill the summary's room and cut the summary off)."""
    profile = {"results": {"reasoning": {"status": "works", "detail": {"shape": CLOSING}}}}
    long = "A long brief of the work to come, line after line.\n" * 250  # ~12,750 chars
    fake_provider.add(
        stream(text_chunks("Noted.")),
        stream(text_chunks("The brief is long; keep its gist.</think>\n\nA long brief.", 4)),
        stream(text_chunks("Ok.")),
    )
    rojo = await rojo_for(
        fake_provider, context_window=12_000, capability_profiles={MODEL: profile}
    )
    first = await run_turn(project=project, rojo=rojo, user=users["editor"], message=long)

    second = await run_turn(
        project=project, rojo=rojo, user=users["editor"], message=long + "Go on.",
        conversation=first.conversation,
    )  # fmt: skip

    assert second.error is None and second.text == "Ok."
    assert [e.text for e in second.events if isinstance(e, SummaryEvent)] == ["A long brief."]
    system = fake_provider.requests[-1]["messages"][0]["content"]
    assert "A long brief." in system and "keep its gist" not in system


UNCLOSED = "Hello! Nothing to think about here."


def shown(events) -> list[tuple[str, str]]:
    """What the page keeps of a turn's events (`type`, `data`): its thinking and reply text
    and its calls, a retraction taking the last thinking back."""
    lines: list[tuple[str, str]] = []
    for kind, data in events:
        if kind == "REASONING" and data.get("retracted"):
            last = max(n for n, (line, _) in enumerate(lines) if line == "thinking")
            del lines[last]
        elif kind in ("REASONING", "CHAT"):
            line = "thinking" if kind == "REASONING" else "reply"
            if lines and lines[-1][0] == line and not data.get("whole"):
                lines[-1] = (line, lines[-1][1] + data["text"])
            else:
                lines.append((line, data["text"]))
        elif kind == "TOOL_CALL":
            lines.append(("call", data["name"]))
    return lines


@pytest.mark.parametrize("then_call", [False, True], ids=["answer", "answer-and-call"])
def test_a_reply_that_never_closes_its_think_tag_takes_its_thinking_back(
    client_for, users, project, fake_provider, then_call, settings
):
    """A model whose thinking opens in its prompt streams what looks like thinking until
    `</think>`; its reply ends without one, so that was its answer. What streamed as
    REASONING is taken back (`retracted`) before the text comes as CHAT: live, replayed
    from the turn's log and as stored, the turn shows the text once, as the reply, with no
    thinking (and none stored, nor its seconds)."""
    profile = {"results": {"reasoning": {"status": "works", "detail": {"shape": CLOSING}}}}
    rojo = make_rojo(fake_provider.base_url, capability_profiles={MODEL: profile})
    settings.ROJO_TOOL_DELTA_SECONDS = 0.05  # a forming call's line shows while it pauses
    held, formed = threading.Event(), threading.Event()
    end = [chunk({}, "stop")]
    if then_call:  # the call's first part, then a pause: its line forms on the page
        call = tool_call_chunks(LIST_ROOT)
        end = [call[0], Gate(formed), *call[1:]]
    fake_provider.add(stream(*text_chunks(UNCLOSED, 2, finish=None), Gate(held), *end))
    if then_call:  # the next response closes its (empty) thinking: its text is the answer
        fake_provider.add(stream(text_chunks("</think>\n\nEmpty.")))
    client = client_for(users["editor"])

    with client.chat_stream(project.pk, rojo=rojo.slug, message="Say hello.") as response:
        events = parse_sse(response.iter_lines())
        live = read_until(events, "REASONING")
        while "".join(e.data["text"] for e in live if e.type == "REASONING") != UNCLOSED:
            live += read_until(events, "REASONING")  # a loaded server reads it in parts
        held.set()  # the thinking is all on the page: the reply may end
        if then_call:
            live += read_until(events, "TOOL_CALL_DELTA")
            formed.set()
        live += list(events)
    conversation = live[0].data["conversation"]
    with client.http.stream("GET", f"/api/conversations/{conversation}/stream") as response:
        replayed = list(parse_sse(response.iter_lines()))
    stored = client.get(f"/api/conversations/{conversation}").json()["events"]

    thoughts = [e.data for e in live if e.type == "REASONING"]
    assert "".join(d["text"] for d in thoughts) == UNCLOSED  # shown as thinking, as it came
    expected = [("reply", UNCLOSED)] + ([("call", "list_files"), ("reply", "Empty.")] * then_call)
    assert shown((e.type, e.data) for e in live) == expected
    assert thoughts[-1] == {"text": "", "retracted": True}
    if then_call:  # the answer shows before the call forms, live as when reloaded
        kinds = [e.type for e in live]
        assert kinds.index("CHAT") < kinds.index("TOOL_CALL_DELTA")
    assert shown((e.type, e.data) for e in replayed) == expected
    assert shown((e["type"], e["data"]) for e in stored) == expected
    reply = stored_history(conversation)[1]
    assert (reply.content, reply.reasoning) == (UNCLOSED, "")
    assert "reasoning_seconds" not in reply.extra
