"""Text no store keeps, from outside: a NUL character (PostgreSQL refuses it in a text column,
SQLite's substr() ends a string at it) and half of a UTF-16 surrogate pair (orjson refuses
it). Each becomes U+FFFD and the rest goes on as sent (rojos.provider.wire_text). And a
tool call's id longer than its column. Run on both databases (tests/conftest.py)."""

import json

import pytest

from rojos.models import Message, UsageRecord
from rojos.tools import RojoTool, RojoToolContext, registry
from tests.support.agent_run import rojo_for, run_turn, valid_history
from tests.support.fake_provider import chunk, stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_nul_in_a_reply_is_stored_as_a_replacement_character_drafts_and_all(
    fake_provider, project, users, settings
):
    """Before: on PostgreSQL the reply's save failed, and the turn with it; on SQLite each
    draft after the NUL lost the text between it and the draft's cut."""
    settings.ROJO_DRAFT_SECONDS = 0
    fake_provider.add(
        stream(
            chunk({"role": "assistant", "content": "A\u0000B"}),
            chunk({"content": "C"}),
            chunk({"content": "D"}),
            chunk({}, "stop"),
            delay=0.1,  # each chunk in its own read, its draft written before the next
        )
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None and run.text == "A\ufffdBCD"
    assert (await valid_history(run.conversation))[-1].content == "A\ufffdBCD"


async def test_the_text_backslash_u0000_is_left_as_it_was_written(fake_provider, project, users):
    """Six characters, as a reply about JSON escapes has them: no NUL, nothing replaced."""
    fake_provider.add(stream(*text_chunks("Write \\u0000 for NUL.")))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert (await valid_history(run.conversation))[-1].content == "Write \\u0000 for NUL."


async def test_an_emoji_cut_between_two_chunks_as_utf16_halves_ends_no_turn(
    fake_provider, project, users
):
    """A gateway that cuts strings by UTF-16 units (as JavaScript does) sends each half of
    the pair in a chunk of its own; before, orjson refused the first and the turn failed."""
    first = json.dumps(chunk({"role": "assistant", "content": "Hi \ud83d"}))
    second = json.dumps(chunk({"content": "\ude00 there"}))
    assert "\\ud83d" in first and "\\ude00" in second
    fake_provider.add(stream(f"data: {first}\n\n", f"data: {second}\n\n", chunk({}, "stop")))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None, run.error
    assert run.text == "Hi \ufffd\ufffd there"
    assert (await valid_history(run.conversation))[-1].content == "Hi \ufffd\ufffd there"


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
async def test_a_number_that_is_not_finite_in_a_chunk_loses_no_reply(
    fake_provider, project, users, number
):
    """`NaN` or `Infinity` in the usage chunk and in a call's extra field (no JSON, but some
    servers' encoders write them): read as null, so the reply is stored with its call and
    its usage estimated. Before, the message's save failed its JSON column (SQLite's check,
    PostgreSQL's jsonb) and the turn ended with an internal error, the reply lost."""
    call = tool_call_chunks([("list_files", {"path": ""})], finish=None)
    call[0]["choices"][0]["delta"]["tool_calls"][0]["logprob"] = "NUMBER"
    usage = '{"choices": [], "usage": {"prompt_tokens": NUMBER, "completion_tokens": 2}}'
    lines = [f"data: {json.dumps(c)}\n\n".replace('"NUMBER"', number) for c in call]
    finish = f"data: {json.dumps(chunk({}, 'tool_calls'))}\n\n"
    fake_provider.add(
        stream(*lines, finish, f"data: {usage.replace('NUMBER', number)}\n\n"),
        stream(text_chunks("Nothing there.")),
    )
    rojo = await rojo_for(fake_provider, stream_usage_refused=True)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None, run.error
    history = await valid_history(run.conversation)
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[1].usage == {"prompt_tokens": None, "completion_tokens": 2}
    assert history[-1].content == "Nothing there."
    assert [r.reported async for r in UsageRecord.objects.filter(message=history[1])] == [False]


async def test_a_streamed_refusal_is_the_reply(fake_provider, project, users):
    """OpenAI streams a refusal (structured outputs, which a rojo's request options may ask
    for) in `delta.refusal`, its content null; before, the reply was empty."""
    fake_provider.add(
        stream(
            chunk({"role": "assistant", "content": None, "refusal": ""}),
            chunk({"refusal": "I'm sorry, I can't help with that."}),
            chunk({}, "stop"),
        )
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None and run.text == "I'm sorry, I can't help with that."
    stored = (await valid_history(run.conversation))[-1]
    assert stored.content == "I'm sorry, I can't help with that."


class NulResult(RojoTool):
    """A tool (an MCP server's, say) whose text result holds a NUL."""

    name = "nul_result"
    description = "Answer a text with a NUL in it."
    parameters = {"type": "object", "properties": {}}

    async def execute(self, args: dict, ctx: RojoToolContext) -> str:
        return "x\x00y"


async def test_a_tool_result_with_a_nul_is_stored(fake_provider, project, users):
    registry.register(NulResult())
    try:
        fake_provider.add(
            stream(*tool_call_chunks([("nul_result", {})])), stream(*text_chunks("Read."))
        )
        rojo = await rojo_for(fake_provider, tools=["nul_result"])

        run = await run_turn(project=project, rojo=rojo, user=users["editor"])
    finally:
        registry.unregister("nul_result")

    assert run.error is None, run.error
    tool = [m for m in await valid_history(run.conversation) if m.role == Message.Role.TOOL]
    assert [m.content for m in tool] == ["x\ufffdy"]


def test_a_chat_message_with_a_nul_is_answered_not_refused_with_a_500(
    client_for, users, project, fake_provider
):
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("Seen.")))

    events = client_for(users["editor"]).chat(project.pk, rojo=rojo.slug, message="a\u0000b")

    assert "".join(e.data.get("text", "") for e in events) == "Seen."
    user_message = Message.objects.get(role=Message.Role.USER)
    assert user_message.content == "a\ufffdb"
    assert fake_provider.requests[0]["messages"][-1]["content"] == "a\ufffdb"


def _call(index: int, call_id: str, name: str, **extra) -> dict:
    function = {"name": name, "arguments": '{"path": ""}'}
    return {"index": index, "id": call_id, "type": "function", "function": function, **extra}


async def test_nuls_in_a_calls_id_name_and_extra_fields_end_no_turn(fake_provider, project, users):
    """A NUL outside the text and the arguments: a call's id, its name, its extra keys (Gemini's
    thought signature) and a delta's unknown keys, all kept in JSON columns. Before, on
    PostgreSQL, the reply's save failed and the turn with it."""
    signature = {"google": {"thought_signature": "sig\u0000nature"}}
    calls = [
        _call(0, "call_\u0000a", "list_files", extra_content=signature),
        _call(1, "call_b", "list\u0000files"),  # no such tool: its result says so
    ]
    fake_provider.add(
        stream(
            chunk({"role": "assistant", "content": None, "vendor_note": "a\u0000b"}),
            chunk({"tool_calls": calls}),
            chunk({}, "tool_calls"),
        ),
        stream(*text_chunks("Listed.")),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None and run.text == "Listed."
    history = await valid_history(run.conversation)
    stored = next(m for m in history if m.tool_calls)
    first, second = stored.tool_calls
    assert first["id"] == "call_\ufffda" and second["function"]["name"] == "list\ufffdfiles"
    assert first["extra_content"] == {"google": {"thought_signature": "sig\ufffdnature"}}
    assert stored.extra["vendor_note"] == "a\ufffdb"
    results = [m.tool_call_id for m in history if m.role == Message.Role.TOOL]
    assert results == ["call_\ufffda", "call_b"]


def test_a_call_id_longer_than_its_column_gets_a_new_one(client_for, users, project, fake_provider):
    """Ids are never sent back as they came (rojos.provider.request.wire_call_id), so one
    longer than the columns that keep it is replaced like a missing one. Before, on
    PostgreSQL, its result's insert failed, and every later message of the conversation was
    refused: a reply still running, then a 500."""
    rojo = make_rojo(fake_provider.base_url)
    long_id = "call_" + "x" * 250
    fake_provider.add(
        stream(chunk({"tool_calls": [_call(0, long_id, "list_files")]}), chunk({}, "tool_calls")),
        stream(*text_chunks("Listed.")),
        stream(*text_chunks("Again.")),
    )
    client = client_for(users["editor"])

    first = client.chat(project.pk, rojo=rojo.slug, message="List.")
    conversation = first[0].data["conversation"]
    second = client.chat(project.pk, rojo=rojo.slug, message="Again?", conversation=conversation)

    assert [e.type for e in first][-2:] == ["CHAT", "DONE"] and "ERROR" not in {
        e.type for e in first + second
    }
    assert "".join(e.data.get("text", "") for e in second) == "Again."
    call_message = Message.objects.get(role=Message.Role.ASSISTANT, tool_calls__isnull=False)
    (call,) = call_message.tool_calls
    assert call["id"] != long_id and len(call["id"]) <= 200
    assert Message.objects.get(role=Message.Role.TOOL).tool_call_id == call["id"]
    sent = fake_provider.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["tool_calls"][0]["id"] == sent[2]["tool_call_id"]
