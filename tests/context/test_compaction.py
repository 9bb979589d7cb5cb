"""Compaction's last resort and overflow recovery's end, through the real loop over HTTP: what
alone is too big for the window is cut with a note on reading the rest; a request refused
twice in a step ends the turn with `context_overflow`, and the next message works."""

import asyncio
import json

import pytest

from roject import storage
from rojos.models import Rojo
from tests.support.agent_run import rojo_for, run_turn, valid_history
from tests.support.fake_provider import (
    Window,
    error_chunk,
    http_error,
    prompt_tokens,
    stream,
    text_chunks,
    tool_call_chunks,
    usage_chunk,
)

pytestmark = pytest.mark.django_db(transaction=True)

WINDOW = 12_000
SYSTEM = "You work on the project's files."


async def project_file(project, name: str, text: str) -> None:
    root = await asyncio.to_thread(storage.project_root_create, project.pk)
    (root / name).write_text(text)


async def test_a_file_too_big_for_the_window_is_sent_cut_with_how_to_read_the_rest(
    fake_provider, project, users
):
    """A 60 KB file read in the current turn cannot be left out: it is cut to fit, and the
    cut says from which line to read on; the stored result stays whole."""
    text = "".join(f"row {n:05d} of the big ledger, with its entries\n" for n in range(1300))
    await project_file(project, "big.md", text)
    fake_provider.window = Window(tokens=WINDOW)
    fake_provider.add(
        stream(tool_call_chunks([("get_text_content", {"path": "big.md"})])),
        stream(text_chunks("Read the start.")),
    )
    rojo = await rojo_for(fake_provider, context_window=WINDOW, system_prompt=SYSTEM)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"], message="Read big.md")

    assert run.error is None and run.text == "Read the start."
    sent = fake_provider.requests[1]["messages"][-1]["content"]
    kept, note = sent.rsplit("\n[", 1)
    line = kept.count("\n") + 1
    assert text.startswith(kept) and 10_000 < len(kept) < len(text)
    assert note.startswith(f"cut to fit the context window: {len(kept):,} of {len(text):,}")
    assert f"get_text_content(offset={line}, limit=…)" in note
    assert prompt_tokens(fake_provider.requests[1]) <= WINDOW
    assert fake_provider.overflowed == []
    history = await valid_history(run.conversation)
    assert history[2].content == text


async def test_the_system_prompt_goes_first_and_the_latest_message_last_even_cut(
    fake_provider, project, users
):
    """A message longer than the whole window is still sent, last and cut, after the
    system prompt; it is stored whole."""
    message = "Please check this log:\n" + "".join(f"event {n:05d} ok\n" for n in range(4000))
    fake_provider.window = Window(tokens=WINDOW)
    fake_provider.add(stream(text_chunks("Checked what fits.")))
    rojo = await rojo_for(fake_provider, context_window=WINDOW, system_prompt=SYSTEM)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"], message=message)

    assert run.error is None and run.text == "Checked what fits."
    (request,) = fake_provider.requests
    first, last = request["messages"][0], request["messages"][-1]
    assert first == {"role": "system", "content": SYSTEM}
    assert last["role"] == "user" and message.startswith(last["content"].rsplit("\n[", 1)[0])
    assert "[cut to fit the context window" in last["content"]
    assert prompt_tokens(request) <= WINDOW
    history = await valid_history(run.conversation)
    assert history[0].content == message


async def test_a_request_refused_twice_ends_the_turn_with_context_overflow_and_the_next_works(
    fake_provider, project, users
):
    """A provider that says only `context_length_exceeded` about a result far denser than
    the rojo's ratio makes it look: the step tries once more, smaller, then the turn ends
    with an ERROR that says what to do. Nothing is lost, the window learned is kept, and
    the next message (whose request leaves the old result out) is answered."""
    await project_file(project, "dense.json", "{}" * 12_000)
    fake_provider.window = Window(tokens=WINDOW, shape="bare")
    fake_provider.add(
        # A count that makes the ratio look like prose's (7 characters a token and more).
        stream(
            tool_call_chunks([("get_text_content", {"path": "dense.json"})]), usage_chunk(800, 9)
        ),
        stream(text_chunks("Thanks.")),
    )
    rojo = await rojo_for(fake_provider, context_window=WINDOW, system_prompt=SYSTEM)

    failed = await run_turn(project=project, rojo=rojo, user=users["editor"], message="Read it")
    learned = await Rojo.objects.aget(pk=rojo.pk)
    after = await run_turn(
        project=project,
        rojo=learned,
        user=users["editor"],
        message="Never mind that file.",
        conversation=failed.conversation,
    )

    assert failed.error is not None and failed.error.code == "context_overflow"
    assert "too long for the model's context window" in str(failed.error)
    assert "Send your message again" in str(failed.error)
    assert fake_provider.overflowed == [1, 2]
    refused, again = fake_provider.requests[1:3]
    assert prompt_tokens(again) < prompt_tokens(refused)
    assert learned.refused_window is not None and learned.refused_window < WINDOW
    assert after.error is None and after.text == "Thanks."
    history = await valid_history(after.conversation)
    assert [m.role for m in history] == ["user", "assistant", "tool", "user", "assistant"]
    assert history[2].content == "{}" * 12_000
    assert "left out to fit" in fake_provider.requests[3]["messages"][3]["content"]


async def test_tool_definitions_larger_than_the_window_say_so_without_a_request(
    fake_provider, project, users
):
    rojo = await rojo_for(fake_provider, context_window=1_024, max_output_tokens=256)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is not None and run.error.code == "context_overflow"
    assert "tool definitions alone" in str(run.error)
    assert fake_provider.requests == []


async def test_a_file_written_whole_is_cut_in_the_call_sent_back_as_valid_json(
    fake_provider, project, users
):
    """The arguments of a call that wrote a file over the window are cut in the next request,
    still a JSON object that says how much was left out; the stored call stays whole."""
    text = "".join(f"line {n:05d} of the new page\n" for n in range(4000))
    fake_provider.window = Window(tokens=WINDOW)
    fake_provider.add(
        stream(tool_call_chunks([("write_text_content", {"path": "page.md", "text": text})])),
        stream(text_chunks("Written.")),
    )
    rojo = await rojo_for(fake_provider, context_window=WINDOW, approval_tools=[])

    run = await run_turn(project=project, rojo=rojo, user=users["editor"], message="Write it")

    assert run.error is None and run.text == "Written."
    (call,) = fake_provider.requests[1]["messages"][1]["tool_calls"]
    sent = json.loads(call["function"]["arguments"])
    assert sent["path"] == "page.md" and text.startswith(sent["text"].split("… [")[0])
    assert sent["text"].endswith(
        f"[{len(text):,} characters; the rest left out to fit the context window]"
    )
    assert prompt_tokens(fake_provider.requests[1]) <= WINDOW
    history = await valid_history(run.conversation)
    assert json.loads(history[1].tool_calls[0]["function"]["arguments"])["text"] == text
    assert (run.root / "page.md").read_text() == text


async def test_an_overflow_reported_mid_stream_is_recovered_from_like_a_refusal(
    fake_provider, project, users
):
    """An error event in the stream, before any text, saying the prompt is too long: the
    window it states is learned and the request goes again, smaller."""
    await project_file(project, "note.md", "a line of the note, about the harbour\n" * 400)
    overflow = error_chunk(
        "This model's maximum context length is 4096 tokens. However, your messages "
        "resulted in 6100 tokens.",
        code="context_length_exceeded",
    )
    fake_provider.add(
        stream(tool_call_chunks([("get_text_content", {"path": "note.md"})])),
        stream(text_chunks("Read.")),
        stream(overflow),
        stream(text_chunks("Short now.")),
    )
    rojo = await rojo_for(fake_provider)
    first = await run_turn(project=project, rojo=rojo, user=users["editor"], message="Read it")

    second = await run_turn(
        project=project,
        rojo=await Rojo.objects.aget(pk=rojo.pk),
        user=users["editor"],
        message="And now?",
        conversation=first.conversation,
    )

    assert second.error is None and second.text == "Short now."
    refused, again = fake_provider.requests[2:]
    assert "left out to fit" not in str(refused) and "left out to fit" in str(again)
    assert (await Rojo.objects.aget(pk=rojo.pk)).refused_window == 4096


async def test_a_refused_request_that_cannot_be_made_smaller_is_not_sent_again(
    fake_provider, project, users
):
    """Nothing to leave out or cut: the turn ends with context_overflow after one request."""
    fake_provider.add(
        http_error(400, {"error": {"message": "x", "code": "context_length_exceeded"}})
    )
    rojo = await rojo_for(fake_provider, tools=[])

    run = await run_turn(project=project, rojo=rojo, user=users["editor"], message="Hi")

    assert run.error is not None and run.error.code == "context_overflow"
    assert "too long for the model's context window" in str(run.error)
    assert len(fake_provider.requests) == 1
