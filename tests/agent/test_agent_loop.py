"""The agent loop, driven in-process against the fake provider over real HTTP."""

import json
import re

import pytest

from roject.models import Role
from rojos.errors import StepLimitReached, TurnError
from rojos.models import Message, Rojo
from rojos.provider.request import wire_call_id
from tests.support.agent_run import rojo_for, run_turn, valid_history
from tests.support.fake_provider import chunk, json_reply, stream, text_chunks, tool_call_chunks
from tests.support.helpers import DEFAULT_TOOLS

pytestmark = pytest.mark.django_db(transaction=True)

BUILTIN_NAMES = set(DEFAULT_TOOLS)
READ_ONLY_NAMES = {"read_path_meta", "get_text_content", "list_files", "search_text"}
PLAIN_SCHEMA_KEYS = {"type", "properties", "required", "description", "enum", "items"}
WIRE_ID = re.compile(r"^[A-Za-z0-9]{9}$")


def offered(request: dict) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools", ())}


def schema_keys(schema: dict) -> set[str]:
    keys = set(schema)
    for sub in schema.get("properties", {}).values():
        keys |= schema_keys(sub)
    if isinstance(schema.get("items"), dict):
        keys |= schema_keys(schema["items"])
    return keys


async def test_plain_text_reply_streams_and_is_stored(fake_provider, project, users):
    """Each content delta is one ChatEvent, and the whole reply is one assistant message."""
    fake_provider.add(stream(text_chunks("Hello from the rojo.", pieces=4)))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"], message="Hi")

    assert run.error is None
    assert run.kinds == ["text"] * 4 and run.text == "Hello from the rojo."
    history = await valid_history(run.conversation)
    assert [(m.role, m.content) for m in history] == [
        ("user", "Hi"),
        ("assistant", "Hello from the rojo."),
    ]
    assert history[1].tool_calls is None and history[1].reasoning == ""


async def test_request_has_only_model_messages_tools_and_stream_by_default(
    fake_provider, project, users
):
    """No extras a provider might reject but the ask for usage in the stream (which is
    dropped for a provider that refuses it); tool schemas use only the plain subset."""
    fake_provider.add(stream(text_chunks("Ok.")))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"], message="Hi")

    assert run.error is None and run.text == "Ok."
    await valid_history(run.conversation)
    (request,) = fake_provider.requests
    assert set(request) == {"model", "messages", "tools", "stream", "stream_options"}
    assert request["model"] == "fake-model" and request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}
    assert request["messages"] == [{"role": "user", "content": "Hi"}]
    assert offered(request) == BUILTIN_NAMES
    for tool in request["tools"]:
        assert set(tool) == {"type", "function"}
        assert schema_keys(tool["function"]["parameters"]) <= PLAIN_SCHEMA_KEYS
    assert fake_provider.headers[0]["authorization"] == "Bearer sk-test-secret-key-123"


async def test_request_adds_temperature_and_request_options_when_the_rojo_sets_them(
    fake_provider, project, users
):
    """The rojo's own options are the only extras, merged at the top of the body."""
    fake_provider.add(stream(text_chunks("Ok.")))
    rojo = await rojo_for(
        fake_provider, temperature=0.2, request_options={"top_p": 0.9, "max_tokens": 256}
    )

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None
    await valid_history(run.conversation)
    (request,) = fake_provider.requests
    assert set(request) == {"model", "messages", "tools", "stream", "temperature", "top_p"} | {
        "max_tokens",
        "stream_options",
    }
    assert (request["temperature"], request["top_p"], request["max_tokens"]) == (0.2, 0.9, 256)


async def test_rojo_without_tools_sends_no_tools_key(fake_provider, project, users):
    """An empty tool list is left out rather than sent as []."""
    fake_provider.add(stream(text_chunks("Ok.")))
    rojo = await rojo_for(fake_provider, tools=[])

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None
    await valid_history(run.conversation)
    assert set(fake_provider.requests[0]) == {"model", "messages", "stream", "stream_options"}


async def test_turns_on_one_loop_share_one_connection_to_the_provider(
    fake_provider, project, users
):
    """Connections are pooled per event loop: the next turn, even of another rojo with another
    key, pays no new connection (over the internet: no TCP and TLS handshake)."""
    fake_provider.add(stream(text_chunks("One.")), stream(text_chunks("Two.")))
    first = await rojo_for(fake_provider)
    second = await rojo_for(fake_provider, slug="second", api_key="sk-second-key-456")

    runs = [await run_turn(project=project, rojo=r, user=users["editor"]) for r in (first, second)]

    assert [run.text for run in runs] == ["One.", "Two."]
    assert fake_provider.peers[0] == fake_provider.peers[1]
    assert fake_provider.headers[1]["authorization"] == "Bearer sk-second-key-456"


async def test_text_before_tool_calls_streams_first_and_is_sent_back(fake_provider, project, users):
    """Text, then the call: the stored assistant message and the next request hold both."""
    preface = "Let me look at the root first."
    fake_provider.add(
        stream(tool_call_chunks([("list_files", {"path": ""})], text_before=preface)),
        stream(text_chunks("The project is empty.")),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None
    first_call = run.kinds.index("tool_call")
    assert set(run.kinds[:first_call]) == {"text"}
    assert run.kinds[first_call:] == ["tool_call", "tool_result", "text"]
    assert "".join(e.text for e in run.events[:first_call]) == preface
    assert run.results[0].result == [] and run.results[0].ok
    history = await valid_history(run.conversation)
    assistant = history[1]
    assert assistant.content == preface and len(assistant.tool_calls) == 1
    sent = fake_provider.requests[1]["messages"][1]
    assert sent["content"] == preface and sent["tool_calls"][0]["function"]["name"] == "list_files"
    assert history[-1].content == "The project is empty."


async def test_tool_call_ids_sent_back_are_nine_alphanumerics_matching_their_results(
    fake_provider, project, users
):
    """Whatever ids the provider used, it gets back 9 letters/digits, the same in every request."""
    ids = ["toolu_01A-b.c/d+e", "toolu_01A-b.c/d+f"]
    listing = {"name": "list_files", "arguments": '{"path": ""}'}
    calls = [
        chunk({"tool_calls": [{"index": n, "id": i, "type": "function", "function": listing}]})
        for n, i in enumerate(ids)
    ]
    fake_provider.add(
        stream(*calls, chunk({}, "tool_calls")),
        stream(tool_call_chunks([("read_path_meta", {"path": "."})])),
        stream(text_chunks("Done.")),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None
    history = await valid_history(run.conversation)
    assert [c["id"] for c in history[1].tool_calls] == ids
    second, third = fake_provider.requests[1:]
    assistant, *tools = second["messages"][1:]
    wire_ids = [call["id"] for call in assistant["tool_calls"]]
    assert all(WIRE_ID.match(i) for i in wire_ids) and len(set(wire_ids)) == 2
    assert wire_ids == [wire_call_id(i) for i in ids]
    assert [t["tool_call_id"] for t in tools] == wire_ids
    assert third["messages"][: len(second["messages"])] == second["messages"]
    later_call = third["messages"][4]["tool_calls"][0]["id"]
    assert WIRE_ID.match(later_call) and third["messages"][5]["tool_call_id"] == later_call


async def test_json_completion_despite_stream_true_still_works(fake_provider, project, users):
    """A server that ignores stream=true and answers one JSON completion is read all the same."""
    call = {
        "id": "call_json_1",
        "type": "function",
        "function": {"name": "create_directory", "arguments": '{"path": "docs"}'},
    }
    usage = {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}

    def completion(message: dict, finish: str) -> dict:
        choice = {"index": 0, "message": message, "finish_reason": finish}
        return {"id": "c1", "object": "chat.completion", "choices": [choice], "usage": usage}

    fake_provider.add(
        json_reply(
            completion({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")
        ),
        json_reply(completion({"role": "assistant", "content": "Made docs."}, "stop")),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None
    assert run.kinds == ["tool_call", "tool_result", "text"] and run.text == "Made docs."
    assert (run.root / "docs").is_dir()
    history = await valid_history(run.conversation)
    assert history[1].tool_calls[0]["function"] == call["function"]
    assert history[1].usage == usage and history[-1].content == "Made docs."


async def test_invalid_json_arguments_become_an_error_result_the_model_reads(
    fake_provider, project, users
):
    """Nothing runs; the model gets an error tool message and the loop goes on."""
    broken = '{"path": "a.txt", "text": "unterminated'
    fake_provider.add(
        stream(tool_call_chunks([("write_text_content", broken)])),
        stream(text_chunks("Sorry, retrying later.")),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None
    assert run.kinds == ["tool_call", "tool_result", "text"]
    assert run.calls[0].args == broken
    (result,) = run.results
    assert not result.ok and "not valid JSON" in result.result["error"]
    assert not (run.root / "a.txt").exists()
    history = await valid_history(run.conversation)
    assert history[2].is_error and json.loads(history[2].content) == result.result
    sent = fake_provider.requests[1]["messages"][2]
    assert sent["role"] == "tool" and json.loads(sent["content"]) == result.result
    # Stored verbatim, but sent back as a JSON object so strict providers accept the history.
    assert history[1].tool_calls[0]["function"]["arguments"] == broken
    sent_call = fake_provider.requests[1]["messages"][1]["tool_calls"][0]
    assert sent_call["function"]["arguments"] == "{}"


async def test_unknown_tool_name_becomes_an_error_result(fake_provider, project, users):
    """The error names the tool and lists the ones on offer."""
    fake_provider.add(
        stream(tool_call_chunks([("delete_everything", {"path": ""})])),
        stream(text_chunks("I cannot do that.")),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None and run.kinds == ["tool_call", "tool_result", "text"]
    error = run.results[0].result["error"]
    assert error.startswith("unknown tool 'delete_everything'") and "list_files" in error
    history = await valid_history(run.conversation)
    assert history[2].is_error and history[2].name == "delete_everything"
    assert json.loads(fake_provider.requests[1]["messages"][2]["content"]) == {"error": error}


@pytest.mark.backend  # a name past the column's 64 characters: PostgreSQL checks it
@pytest.mark.parametrize("name", ["list files", "functions.list_files", "t" * 65, "dir/ls"])
async def test_a_made_up_tool_name_providers_refuse_goes_back_as_a_stand_in(
    fake_provider, project, users, name
):
    """A call named outside ^[a-zA-Z0-9_-]{1,64}$ (which OpenAI checks in a request's
    history too) is answered as an unknown tool, stored and shown as the model sent it, and
    sent back in later requests as `unknown_tool`, its result saying what it was. Before,
    the name went back as it came, and a provider that checks it refused every later
    request of the conversation."""
    fake_provider.add(
        stream(tool_call_chunks([(name, {"path": ""})])),
        stream(text_chunks("Sorry.")),
        stream(text_chunks("Hello again.")),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])
    later = await run_turn(
        project=project, rojo=rojo, user=users["editor"], conversation=run.conversation
    )

    assert run.error is None and later.error is None
    assert run.calls[0].name == name
    error = run.results[0].result["error"]
    assert error.startswith(f"unknown tool {name!r}")
    history = await valid_history(run.conversation)
    assert history[1].tool_calls[0]["function"]["name"] == name
    assert history[2].name == name[:64]  # as much as the column holds
    assert len(fake_provider.requests) == 3  # the reply after the result, the next turn's
    for request in fake_provider.requests[1:]:
        [called] = [m["tool_calls"] for m in request["messages"] if m.get("tool_calls")]
        [answered] = [m["content"] for m in request["messages"] if m["role"] == "tool"]
        assert called[0]["function"]["name"] == "unknown_tool"
        assert json.loads(called[0]["function"]["arguments"]) == {"path": ""}
        assert json.loads(answered) == {"error": error}


@pytest.mark.backend  # stored on PostgreSQL too
async def test_a_long_unknown_tool_name_is_named_cut_short(fake_provider, project, users):
    """The error names an invented tool by its first 100 characters and an ellipsis: a
    model that wrote a kilobyte of name does not get it back in every later request."""
    name = "do_" * 2000
    fake_provider.add(
        stream(tool_call_chunks([(name, {})])),
        stream(text_chunks("I cannot do that.")),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    error = run.results[0].result["error"]
    assert error.startswith(f"unknown tool {name[:100] + '…'!r}; available tools: ")
    assert len(error) < 1000
    await valid_history(run.conversation)


async def test_step_limit_stops_a_rojo_that_keeps_calling_tools(fake_provider, project, users):
    """After max_steps model calls the turn ends with StepLimitReached; every call is answered."""
    keep_listing = tool_call_chunks([("list_files", {"path": ""})])
    fake_provider.add(stream(keep_listing), stream(keep_listing))
    rojo = await rojo_for(fake_provider, max_steps=2)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert isinstance(run.error, StepLimitReached)
    assert "limit of 2 steps" in str(run.error)
    assert run.kinds == ["tool_call", "tool_result"] * 2
    assert len(fake_provider.requests) == 2
    history = await valid_history(run.conversation)
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant", "tool"]

    fake_provider.add(stream(text_chunks("Finished.")))
    again = await run_turn(
        project=project, rojo=rojo, user=users["editor"], conversation=run.conversation
    )
    assert again.error is None and again.text == "Finished."
    assert [m["role"] for m in fake_provider.requests[-1]["messages"]][-2:] == ["tool", "user"]
    await valid_history(run.conversation)


async def test_viewer_is_offered_only_reading_tools_and_a_write_call_is_refused(
    fake_provider, project, users
):
    """A viewer's rojo cannot change files, even if the model calls a writing tool anyway."""
    fake_provider.add(
        stream(tool_call_chunks([("write_text_content", {"path": "x.txt", "text": "hi"})])),
        stream(text_chunks("I may not write here.")),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["viewer"], role=Role.VIEWER)

    assert offered(fake_provider.requests[0]) == READ_ONLY_NAMES
    assert run.error is None and run.kinds == ["tool_call", "tool_result", "text"]
    (result,) = run.results
    assert not result.ok and "read-only" in result.result["error"]
    assert not (run.root / "x.txt").exists()
    history = await valid_history(run.conversation)
    assert history[2].is_error
    assert "read-only" in fake_provider.requests[1]["messages"][2]["content"]


async def test_tool_not_enabled_for_the_rojo_is_not_offered_and_refused(
    fake_provider, project, users
):
    """Only the rojo's own tools are offered; calling another one is an error result."""
    fake_provider.add(
        stream(tool_call_chunks([("get_text_content", {"path": "secret.txt"})])),
        stream(text_chunks("That tool is not mine.")),
    )
    rojo = await rojo_for(fake_provider, tools=["list_files", "read_path_meta"])

    run = await run_turn(project=project, rojo=rojo, user=users["owner"], role=Role.OWNER)

    assert offered(fake_provider.requests[0]) == {"list_files", "read_path_meta"}
    (result,) = run.results
    assert result.result == {"error": "tool 'get_text_content' is not enabled for this rojo"}
    await valid_history(run.conversation)
    assert "not enabled" in fake_provider.requests[1]["messages"][2]["content"]


async def test_calls_left_open_by_a_crash_are_answered_interrupted_before_the_next_message(
    fake_provider, project, users
):
    """A killed process leaves calls without results; the next turn closes them first."""
    rojo = await rojo_for(fake_provider)
    conversation = await project.conversations.acreate(rojo=rojo, user=users["editor"])
    calls = [
        {"id": f"call_{n}", "type": "function", "function": {"name": "list_files", "arguments": a}}
        for n, a in enumerate(['{"path": ""}', ""])
    ]
    await Message.objects.acreate(conversation=conversation, position=0, role="user", content="Go")
    await Message.objects.acreate(
        conversation=conversation, position=1, role="assistant", tool_calls=calls
    )
    fake_provider.add(stream(text_chunks("Where were we?")))

    run = await run_turn(
        project=project,
        rojo=rojo,
        user=users["editor"],
        message="Hello?",
        conversation=conversation,
    )

    assert run.error is None and run.text == "Where were we?"
    history = await valid_history(conversation)
    assert [(m.role, m.tool_call_id) for m in history] == [
        ("user", ""),
        ("assistant", ""),
        ("tool", "call_0"),
        ("tool", "call_1"),
        ("user", ""),
        ("assistant", ""),
    ]
    assert all(json.loads(m.content) == {"error": "interrupted"} for m in history[2:4])
    assert all(m.is_error for m in history[2:4])
    messages = fake_provider.requests[0]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user"]
    wire_ids = [call["id"] for call in messages[1]["tool_calls"]]
    assert [m["tool_call_id"] for m in messages[2:4]] == wire_ids
    assert [call["function"]["arguments"] for call in messages[1]["tool_calls"]] == [
        '{"path": ""}',
        "{}",
    ]
    assert messages[4] == {"role": "user", "content": "Hello?"}


def test_a_history_loads_from_its_own_table_in_position_order():
    """Each turn loads its history: ordering by the conversation relation would join the
    conversations and sort by their date first."""
    sql = str(Message.objects.filter(conversation_id=1).query)

    assert "JOIN" not in sql
    assert sql.endswith(
        'ORDER BY "rojos_message"."conversation_id" ASC, "rojos_message"."position" ASC'
    )


async def test_request_options_stored_before_validation_fail_the_turn_with_a_clear_error(
    fake_provider, project, users
):
    """A rojo saved with options that are not an object (validated since) cannot be sent."""
    rojo = await rojo_for(fake_provider)
    await Rojo.objects.filter(pk=rojo.pk).aupdate(request_options="reasoning_effort=low")
    await rojo.arefresh_from_db()

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert isinstance(run.error, TurnError)
    assert str(run.error) == (
        "The rojo 'Test rojo' has request options that are not a JSON object; an administrator "
        "can fix them in the admin."
    )
    assert fake_provider.requests == []
    await valid_history(run.conversation)
