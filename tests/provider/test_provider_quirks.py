"""One case per provider quirk from PROVIDERS.md, each through the real loop over HTTP."""

import json

import pytest

from rojos.provider.request import wire_call_id
from tests.support.agent_run import rojo_for, run_turn, valid_history
from tests.support.fake_provider import chunk, stream, text_chunks, tool_call_chunks, usage_chunk

pytestmark = pytest.mark.django_db(transaction=True)

PARALLEL = [("create_directory", {"path": "alpha"}), ("create_directory", {"path": "beta"})]
LIST_ROOT = [("list_files", {"path": ""})]


def scripted_ids(chunks: list[dict]) -> list[str]:
    """The distinct call ids a scripted stream carries, in order."""
    ids = []
    for item in chunks:
        for choice in item["choices"]:
            for call in choice["delta"].get("tool_calls", ()):
                if call.get("id") and call["id"] not in ids:
                    ids.append(call["id"])
    return ids


async def run_parallel(fake_provider, project, users, **quirks):
    """Two create_directory calls streamed with `quirks`, then a text reply; checks the outcome.

    Returns the turn, the stored history and the scripted chunks.
    """
    chunks = tool_call_chunks(PARALLEL, **quirks)
    run, history = await run_parallel_chunks(fake_provider, project, users, chunks)
    return run, history, chunks


async def run_parallel_chunks(fake_provider, project, users, chunks: list[dict]):
    """The two create_directory calls streamed as `chunks`; returns the turn and history."""
    fake_provider.add(stream(chunks), stream(text_chunks("Both made.")))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None
    assert run.kinds == ["tool_call", "tool_result", "tool_call", "tool_result", "text"]
    assert [(e.name, e.args) for e in run.calls] == PARALLEL
    assert [e.result for e in run.results] == [{"ok": True}] * 2
    assert (run.root / "alpha").is_dir() and (run.root / "beta").is_dir()
    history = await valid_history(run.conversation)
    assert [m.role for m in history] == ["user", "assistant", "tool", "tool", "assistant"]
    stored = history[1].tool_calls
    assert [c["function"] for c in stored] == [
        {"name": name, "arguments": json.dumps(args)} for name, args in PARALLEL
    ]
    ids = [c["id"] for c in stored]
    assert len(set(ids)) == 2
    assert [m.tool_call_id for m in history[2:4]] == ids == [e.id for e in run.calls]
    assistant, *tools = fake_provider.requests[1]["messages"][1:]
    wire_ids = [wire_call_id(i) for i in ids]
    assert [c["id"] for c in assistant["tool_calls"]] == wire_ids
    assert [t["tool_call_id"] for t in tools] == wire_ids
    return run, history


async def test_ids_on_the_first_delta_only_assemble_fragmented_calls(fake_provider, project, users):
    """OpenAI's shape: id and name once, then argument fragments matched by index."""
    _, history, chunks = await run_parallel(fake_provider, project, users, ids="first")
    assert [c["id"] for c in history[1].tool_calls] == scripted_ids(chunks)


async def test_same_id_and_name_on_every_delta_are_not_concatenated(fake_provider, project, users):
    """llama-cpp-python repeats the full name and the same id on every chunk."""
    chunks = tool_call_chunks(PARALLEL, ids="every")
    names = iter(name for name, _ in PARALLEL)
    for item in chunks:
        for call in item["choices"][0]["delta"].get("tool_calls", ()):
            if "name" in call["function"]:
                current = next(names)
            call["function"]["name"] = current
    fake_provider.add(stream(chunks), stream(text_chunks("Both made.")))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None
    assert [(e.name, e.args) for e in run.calls] == PARALLEL
    history = await valid_history(run.conversation)
    assert [c["id"] for c in history[1].tool_calls] == scripted_ids(chunks)
    assert [c["function"]["name"] for c in history[1].tool_calls] == ["create_directory"] * 2


async def test_missing_ids_are_generated_and_the_tool_messages_match(fake_provider, project, users):
    """Calls matched by index alone get fresh ids, used for both the call and its result."""
    _, history, chunks = await run_parallel(fake_provider, project, users, ids="none")
    assert scripted_ids(chunks) == []
    assert all(c["id"].startswith("call_") for c in history[1].tool_calls)


async def test_gemini_whole_calls_without_index_are_two_calls(fake_provider, project, users):
    """Gemini omits index and sends each parallel call whole, with its id, in its own chunk."""
    _, history, chunks = await run_parallel(
        fake_provider, project, users, index="missing", arguments="whole"
    )
    assert [c["id"] for c in history[1].tool_calls] == scripted_ids(chunks)


@pytest.mark.parametrize("arguments", ["whole", "fragments"])
async def test_ollama_index_zero_for_every_call_with_distinct_ids(
    fake_provider, project, users, arguments
):
    """Ollama 0.20 numbers every parallel call 0; a new id still starts a new call."""
    _, history, chunks = await run_parallel(
        fake_provider, project, users, index="zero", arguments=arguments
    )
    assert [c["id"] for c in history[1].tool_calls] == scripted_ids(chunks)


async def test_whole_calls_without_id_or_index_in_separate_chunks_are_two_calls(
    fake_provider, project, users
):
    """A named delta after a complete call is the next call, not more of the same."""
    _, history, _ = await run_parallel(
        fake_provider, project, users, ids="none", index="missing", arguments="whole"
    )
    assert all(c["id"].startswith("call_") for c in history[1].tool_calls)


def call_delta(**call) -> dict:
    return {"tool_calls": [call]}


@pytest.mark.parametrize("late", ["changed", "late"])
async def test_an_id_that_changes_or_comes_late_on_continuations_is_one_call(
    fake_provider, project, users, late
):
    """Poolside sends one id on the first delta and another on the rest; an id may also
    arrive only after the name. A delta without a name continues its call either way."""
    first = {"index": 0, "type": "function", "function": {"name": "list_files", "arguments": ""}}
    if late == "changed":
        first["id"] = "call_A"
    fake_provider.add(
        stream(
            chunk({"role": "assistant", **call_delta(**first)}),
            chunk(call_delta(index=0, id="call_B", function={"arguments": '{"path"'})),
            chunk(call_delta(index=0, id="call_B", function={"arguments": ': ""}'})),
            chunk({}, "tool_calls"),
        ),
        stream(text_chunks("Empty.")),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None
    assert [(e.name, e.args) for e in run.calls] == [("list_files", {"path": ""})]
    history = await valid_history(run.conversation)
    expected_id = "call_A" if late == "changed" else "call_B"
    assert [c["id"] for c in history[1].tool_calls] == [expected_id]


@pytest.mark.parametrize("arguments", ["whole", "fragments"])
async def test_one_id_for_parallel_calls_at_two_indexes_stays_two_calls(
    fake_provider, project, users, arguments
):
    """DeepSeek, GLM and Kimi (through vLLM, say) may give parallel calls the same id."""
    chunks = tool_call_chunks(PARALLEL, ids="every", arguments=arguments)
    for item in chunks:
        for call in item["choices"][0]["delta"].get("tool_calls", ()):
            call["id"] = "call_same"
    await run_parallel_chunks(fake_provider, project, users, chunks)


async def test_ids_that_restart_every_response_are_made_unique_in_the_conversation(
    fake_provider, project, users
):
    """vLLM's Kimi parser names calls "create_directory:0" in every response; results are
    matched to calls by id, and Anthropic refuses a request with an id twice."""

    def make(path: str):
        return stream(
            chunk(
                call_delta(
                    index=0,
                    id="create_directory:0",
                    type="function",
                    function={"name": "create_directory", "arguments": json.dumps({"path": path})},
                ),
                "tool_calls",
            )
        )

    fake_provider.add(make("alpha"), make("beta"), stream(text_chunks("Both made.")))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None
    history = await valid_history(run.conversation)
    first, second = history[1].tool_calls[0]["id"], history[3].tool_calls[0]["id"]
    assert first == "create_directory:0" and second != first
    assert [history[2].tool_call_id, history[4].tool_call_id] == [first, second]
    wire = fake_provider.requests[2]["messages"]
    sent = [call["id"] for m in wire for call in m.get("tool_calls") or ()]
    assert sent == [wire_call_id(first), wire_call_id(second)]


async def test_no_argument_call_then_another_without_id_or_index_stay_two_calls(
    fake_provider, project, users
):
    """A call with no arguments is complete too: a differently named delta starts a new one."""
    calls = [("list_files", None), ("create_directory", {"path": "alpha"})]
    fake_provider.add(
        stream(tool_call_chunks(calls, ids="none", index="missing", arguments="whole")),
        stream(text_chunks("Done.")),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert [(e.name, e.args) for e in run.calls] == [("list_files", {}), *calls[1:]]
    assert (run.root / "alpha").is_dir()
    history = await valid_history(run.conversation)
    assert [c["function"]["name"] for c in history[1].tool_calls] == [n for n, _ in calls]


@pytest.mark.parametrize(
    ("args", "arguments"),
    [("", "whole"), (None, "whole"), ("", "fragments")],
    ids=["empty-string", "key-missing", "empty-fragment"],
)
async def test_empty_or_missing_arguments_run_with_an_empty_object(
    fake_provider, project, users, args, arguments
):
    """The tool is called with {} (list_files then asks for its path), and "{}" is sent back."""
    fake_provider.add(
        stream(tool_call_chunks([("list_files", args)], arguments=arguments)),
        stream(text_chunks("I forgot the path.")),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None and run.calls[0].args == {}
    assert run.results[0].result == {"error": "missing required argument 'path'"}
    history = await valid_history(run.conversation)
    assert history[1].tool_calls[0]["function"]["arguments"] == ""
    sent_call = fake_provider.requests[1]["messages"][1]["tool_calls"][0]
    assert sent_call["function"] == {"name": "list_files", "arguments": "{}"}


async def test_trailing_empty_fragment_after_whole_arguments_changes_nothing(
    fake_provider, project, users
):
    """Some servers send one more "" fragment after a call is done."""
    await run_parallel(fake_provider, project, users, arguments="trailing_empty")


async def test_trailing_empty_fragment_without_index_or_id_stays_on_its_call(
    fake_provider, project, users
):
    """An unnamed "" fragment continues the last call rather than starting a nameless one."""
    await run_parallel(
        fake_provider, project, users, ids="none", index="missing", arguments="trailing_empty"
    )


async def test_lm_studio_empty_name_on_continuations_keeps_the_first_name(
    fake_provider, project, users
):
    """LM Studio sends "name": "" with every argument fragment."""
    await run_parallel(fake_provider, project, users, empty_name_on_continuation=True)


async def test_finish_reason_stop_with_tool_calls_still_runs_them(fake_provider, project, users):
    """Gemini 3 says "stop" after tool calls; the calls decide, not finish_reason."""
    await run_parallel(fake_provider, project, users, finish="stop")


async def test_finish_reason_in_the_last_call_chunk(fake_provider, project, users):
    """Mistral puts finish_reason in the same chunk as the (whole) calls."""
    await run_parallel(fake_provider, project, users, arguments="whole", finish_in_last=True)


async def test_a_call_cut_by_the_output_limit_is_told_so_and_runs_nothing(
    fake_provider, project, users
):
    """finish_reason "length" in the middle of a call's arguments: the calls before it run;
    the cut one runs nothing, and its result tells the model that its output limit cut the
    arguments off (not only that they are not valid JSON, which has it send the same again,
    cut at the same place), so that it writes less at once."""
    cut = '{"path": "note.txt", "text": "A long note that the limit cuts off in the mid'
    calls = [("create_directory", {"path": "alpha"}), ("write_text_content", cut)]
    fake_provider.add(
        stream(tool_call_chunks(calls, finish="length")), stream(text_chunks("Shorter then."))
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None and run.text == "Shorter then."
    assert [r.ok for r in run.results] == [True, False]
    assert (run.root / "alpha").is_dir() and not (run.root / "note.txt").exists()
    told = run.results[1].result["error"]
    assert "output limit" in told and "cut off" in told
    sent = fake_provider.requests[1]["messages"]
    assert sent[1]["tool_calls"][1]["function"]["arguments"] == "{}"
    assert json.loads(sent[-1]["content"]) == {"error": told}


async def test_usage_only_last_chunk_is_stored_on_each_assistant_message(
    fake_provider, project, users
):
    """A final chunk with choices [] carries usage; it is read, never indexed blindly."""
    fake_provider.add(
        stream(tool_call_chunks(LIST_ROOT), usage_chunk(10, 5)),
        stream(text_chunks("Empty."), usage_chunk(20, 3)),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None and run.kinds == ["tool_call", "tool_result", "text"]
    history = await valid_history(run.conversation)
    assert history[1].usage == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    assert history[3].usage == {"prompt_tokens": 20, "completion_tokens": 3, "total_tokens": 23}
    assert "usage" not in json.dumps(fake_provider.requests[1]["messages"])


async def test_sse_comments_and_blank_data_lines_are_ignored(fake_provider, project, users):
    """OpenRouter sends ": OPENROUTER PROCESSING" keep-alive comments before the first chunk."""
    fake_provider.add(
        stream(": OPENROUTER PROCESSING\n\n", "data:\n\n", text_chunks("Hi!", pieces=2))
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None and run.kinds == ["text", "text"] and run.text == "Hi!"
    history = await valid_history(run.conversation)
    assert history[-1].content == "Hi!"


async def test_lines_end_in_cr_lf_or_cr_and_may_be_split_anywhere(fake_provider, project, users):
    """SSE lines may end in \\r\\n or a lone \\r, and HTTP chunks may cut a line (or its
    ending) in two: the same chunks come out either way."""
    first, second, last = (
        f"data: {json.dumps(item)}" for item in text_chunks("Hello, world.", pieces=2)
    )
    fake_provider.add(
        stream(
            first[:9],
            first[9:] + "\r",
            "\n\r\n" + second + "\r\r" + last[:-3],
            last[-3:] + "\r\n\r\ndata: [DO",
            "NE]\r\n\r\n",
            done=False,
            delay=0.01,  # each piece arrives on its own
        )
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None and run.text == "Hello, world."
    history = await valid_history(run.conversation)
    assert history[-1].content == "Hello, world."


async def test_a_stream_kept_open_after_done_ends_the_step_within_a_second(
    fake_provider, project, users, monkeypatch
):
    """The body after [DONE] is read so the connection can be reused, but a server that
    keeps sending keep-alives instead of ending it does not hold the turn."""
    from tests.support.fake_provider import _Handler

    written: list[str] = []
    write_chunk = _Handler._write_chunk
    monkeypatch.setattr(
        _Handler, "_write_chunk", lambda self, text: (written.append(text), write_chunk(self, text))
    )
    pings = [": ping\n\n"] * 100
    fake_provider.add(
        stream(text_chunks("Done."), "data: [DONE]\n\n", *pings, done=False, delay=0.1)
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None and run.text == "Done."
    # The step ended while the server was still sending its pings (ten seconds of them).
    assert "data: [DONE]\n\n" in written and written.count(": ping\n\n") < len(pings)


async def test_mistral_typed_content_parts_stream_text_and_store_thinking(
    fake_provider, project, users
):
    """Content as a list of parts: text parts are streamed, thinking parts kept as reasoning."""
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "A greeting."}]}
    fake_provider.add(
        stream(
            chunk({"role": "assistant", "content": [thinking]}),
            chunk({"content": [{"type": "text", "text": "Hello"}]}),
            chunk({"content": [{"type": "text", "text": " there."}]}, "stop"),
        ),
        stream(text_chunks("Still here.")),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"], message="Hi")

    assert run.kinds == ["reasoning", "text", "text"] and run.text == "Hello there."
    assert run.error is None and run.events[0].text == "A greeting."
    history = await valid_history(run.conversation)
    assert (history[1].content, history[1].reasoning) == ("Hello there.", "A greeting.")

    await run_turn(
        project=project,
        rojo=rojo,
        user=users["editor"],
        message="Ok",
        conversation=run.conversation,
    )
    assert fake_provider.requests[1]["messages"] == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello there."},
        {"role": "user", "content": "Ok"},
    ]


async def test_reasoning_content_goes_back_with_its_calls(fake_provider, project, users):
    """DeepSeek's thinking mode answers 400 to a tool call sent back without the
    reasoning_content that came with it (Mistral's 422 concerns its own thinking parts)."""
    fake_provider.add(
        stream(
            chunk({"role": "assistant", "reasoning_content": "I should "}),
            chunk({"reasoning_content": "list the root."}),
            tool_call_chunks(LIST_ROOT),
        ),
        stream(text_chunks("It is empty.")),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None and run.kinds[-3:] == ["tool_call", "tool_result", "text"]
    history = await valid_history(run.conversation)
    assert history[1].reasoning == "I should list the root."
    assert history[1].content is None
    sent = fake_provider.requests[1]["messages"][1]
    assert set(sent) == {"role", "tool_calls", "reasoning_content"}
    assert sent["reasoning_content"] == "I should list the root."


async def test_mistral_thinking_parts_are_never_sent_back(fake_provider, project, users):
    """Mistral answers 422 to reasoning in history: its thinking parts stay on our side,
    even beside a tool call."""
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "List it."}]}
    fake_provider.add(
        stream(chunk({"role": "assistant", "content": [thinking]}), tool_call_chunks(LIST_ROOT)),
        stream(text_chunks("It is empty.")),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None
    history = await valid_history(run.conversation)
    assert history[1].reasoning == "List it."
    assert set(fake_provider.requests[1]["messages"][1]) == {"role", "tool_calls"}
    assert "List it." not in json.dumps(fake_provider.requests[1])


async def test_gemini_thought_signature_is_stored_and_sent_back_unchanged(
    fake_provider, project, users
):
    """extra_content on a tool call goes back with that call on the next request."""
    signature = {"google": {"thought_signature": "c2lnbmF0dXJlLWJ5dGVz"}}
    fake_provider.add(
        stream(
            tool_call_chunks(
                LIST_ROOT, index="missing", arguments="whole", extra={"extra_content": signature}
            )
        ),
        stream(text_chunks("Empty.")),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None
    history = await valid_history(run.conversation)
    assert history[1].tool_calls[0]["extra_content"] == signature
    sent_call = fake_provider.requests[1]["messages"][1]["tool_calls"][0]
    assert sent_call["extra_content"] == signature
    assert sent_call["function"] == {"name": "list_files", "arguments": '{"path": ""}'}


async def test_a_reply_that_said_nothing_is_not_sent_back_empty(fake_provider, project, users):
    """Gemini and reasoning models may end with no text and no call; Mistral refuses an
    assistant message with neither, and chat templates refuse two user messages in a row."""
    fake_provider.add(
        stream(
            chunk({"role": "assistant", "reasoning_content": "Nothing to add."}), chunk({}, "stop")
        ),
        stream(text_chunks("Hello.")),
    )
    rojo = await rojo_for(fake_provider)
    run = await run_turn(project=project, rojo=rojo, user=users["editor"], message="Hi")
    assert run.error is None and run.text == ""

    again = await run_turn(
        project=project,
        rojo=rojo,
        user=users["editor"],
        message="Hello?",
        conversation=run.conversation,
    )

    assert again.error is None
    history = await valid_history(run.conversation)
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
    assert fake_provider.requests[1]["messages"] == [{"role": "user", "content": "Hi\n\nHello?"}]


async def test_a_thought_signature_goes_back_only_to_the_model_that_signed_it(
    fake_provider, project, users
):
    """A conversation begun on Gemini and continued with another rojo: Mistral refuses
    fields it does not know, and only Gemini reads its signatures."""
    signature = {"google": {"thought_signature": "c2lnbmF0dXJl"}}
    call = tool_call_chunks(
        LIST_ROOT, index="missing", arguments="whole", extra={"extra_content": signature}
    )
    fake_provider.add(stream(call), stream(text_chunks("Empty.")), stream(text_chunks("Hi.")))
    gemini = await rojo_for(fake_provider, model="gemini-3-flash")
    run = await run_turn(project=project, rojo=gemini, user=users["editor"])
    assert run.error is None
    mistral = await rojo_for(fake_provider, model="mistral-large-latest", slug="mistral")

    await run_turn(
        project=project,
        rojo=mistral,
        user=users["editor"],
        message="More",
        conversation=run.conversation,
    )

    history = await valid_history(run.conversation)
    assert history[1].extra == {"model": "gemini-3-flash"}
    assert fake_provider.requests[1]["messages"][1]["tool_calls"][0]["extra_content"] == signature
    assert "extra_content" not in json.dumps(fake_provider.requests[2]["messages"])
