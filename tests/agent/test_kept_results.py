"""Large results paged, not cut (#36): a tool result over ROJO_MAX_READ_BYTES is kept with
the conversation, outside the project's root; the model gets its head, size and handle, reads
any range with read_result, and what it reads counts against the turn's read budget."""

import json

import pytest
from asgiref.sync import async_to_sync

from roject.storage import project_root_create, results_kept
from rojos.conversations.services import conversation_delete
from rojos.models import Conversation
from tests.support.big_results import BIG
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import assert_history_valid, files_in, make_rojo, stored_history

pytestmark = pytest.mark.django_db(transaction=True)


def handle_sent(body: dict) -> str:
    """The handle of the kept result, as the model was told it."""
    tool_messages = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    return json.loads(tool_messages[0])["handle"]


def read_result_call(offset: int, length: int):
    def respond(body: dict):
        args = {"handle": handle_sent(body), "offset": offset, "length": length}
        return stream(*tool_call_chunks([("read_result", args)], arguments="whole"))

    return respond


def offered(body: dict) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools") or ()]


def test_a_3mb_search_result_is_paged_and_its_reads_counted(
    client_for, users, project, fake_provider, big_search, settings
):
    """The model gets the head and a handle, reads the middle with read_result, and the read
    budget counts it: a second large read no longer fits."""
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_TURN_READ_BYTES = 80_000
    size = len(BIG.encode())
    assert size > 3_000_000
    rojo = make_rojo(fake_provider.base_url, tools=["big_search"])
    middle = size // 2
    fake_provider.add(
        stream(*tool_call_chunks([("big_search", {})], arguments="whole")),
        read_result_call(middle, 40_000),
        read_result_call(middle + 40_000, 40_000),
        stream(*text_chunks("Read what fitted.")),
    )

    viewer = client_for(users["viewer"])
    events = viewer.chat(project.pk, rojo=rojo.slug, message="Find it")

    paged, middle_read, refused = [e.data for e in events if e.type == "TOOL_RESULT"]
    assert paged["ok"] and set(paged["result"]) == {"head", "size", "handle", "note"}
    assert paged["result"]["head"] == BIG[: 16 * 1024]
    assert paged["result"]["size"] == size
    assert "read_result (handle, offset, length)" in paged["result"]["note"]
    assert middle_read["result"] == {
        "text": BIG[middle : middle + 40_000],
        "offset": middle,
        "end": middle + 40_000,
        "size": size,
    }
    assert refused["ok"] is False
    assert refused["result"]["error"].startswith("not returned: the result is ")
    assert "(ROJO_TURN_READ_BYTES)" in refused["result"]["error"]
    # read_result is offered once a result is kept, though the rojo enables only big_search.
    requests = fake_provider.requests
    assert offered(requests[0]) == ["big_search"]
    assert sorted(offered(requests[1])) == ["big_search", "read_result"]
    told = json.loads(requests[2]["messages"][-1]["content"])
    assert told["text"] == BIG[middle : middle + 40_000]  # the model read the middle
    # The whole result never went to the model, and nothing was written into the root.
    assert all(len(json.dumps(body)) < 150_000 for body in requests)
    assert files_in(project_root_create(project.pk)) == {}
    conversation = Conversation.objects.get(pk=events[0].data["conversation"])
    assert_history_valid(stored_history(conversation.pk))
    assert results_kept(project_id=project.pk, conversation_id=conversation.pk)

    # The activity line's link: the whole result, for whoever may read the conversation.
    whole = f"/api/conversations/{conversation.pk}/results/{paged['result']['handle']}"
    assert viewer.http.get(whole).text == BIG
    assert client_for(users["outsider"]).http.get(whole).status_code == 404
    assert viewer.http.get(whole[:-4] + "0000").status_code == 404

    async_to_sync(conversation_delete)(conversation=conversation)

    assert not results_kept(project_id=project.pk, conversation_id=conversation.pk)
    assert viewer.http.get(whole).status_code == 404


def test_a_result_within_the_limit_is_handed_over_whole(
    client_for, users, project, fake_provider, big_search, settings
):
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_MAX_READ_BYTES = 4 * 1024 * 1024
    rojo = make_rojo(fake_provider.base_url, tools=["big_search"])
    fake_provider.add(
        stream(*tool_call_chunks([("big_search", {})], arguments="whole")),
        stream(*text_chunks("All of it.")),
    )

    events = client_for(users["viewer"]).chat(project.pk, rojo=rojo.slug, message="Find it")

    assert [e.data["result"] for e in events if e.type == "TOOL_RESULT"] == [BIG]
    assert offered(fake_provider.requests[1]) == ["big_search"]
    conversation_id = events[0].data["conversation"]
    assert not results_kept(project_id=project.pk, conversation_id=conversation_id)


def test_past_the_kept_limit_only_its_start_is_kept_and_the_model_told(
    client_for, users, project, fake_provider, big_search, settings
):
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_MAX_KEPT_RESULT_BYTES = 2_000_000
    rojo = make_rojo(fake_provider.base_url, tools=["big_search"])
    fake_provider.add(
        stream(*tool_call_chunks([("big_search", {})], arguments="whole")),
        read_result_call(1_999_990, 1000),
        stream(*text_chunks("The start of it.")),
    )

    events = client_for(users["viewer"]).chat(project.pk, rojo=rojo.slug, message="Find it")

    paged, tail = [e.data["result"] for e in events if e.type == "TOOL_RESULT"]
    assert paged["size"] == len(BIG.encode())
    assert paged["note"].endswith(
        "Only its first 2,000,000 bytes were kept (ROJO_MAX_KEPT_RESULT_BYTES): the rest is lost."
    )
    assert tail == {
        "text": BIG[1_999_990:2_000_000],
        "offset": 1_999_990,
        "end": 2_000_000,
        "size": 2_000_000,
    }


def test_a_page_as_long_as_the_read_limit_comes_whole_not_paged_again(
    client_for, users, project, fake_provider, big_search, settings
):
    """read_result's default length is the read limit; its answer as JSON (each line break
    escaped) is longer than that, and was kept again: the model got 16 KB of the page and a
    new handle, whose read went the same way."""
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_MAX_READ_BYTES = 20_000
    rojo = make_rojo(fake_provider.base_url, tools=["big_search"])
    fake_provider.add(
        stream(*tool_call_chunks([("big_search", {})], arguments="whole")),
        read_result_call(0, 20_000),
        stream(*text_chunks("Read the first page.")),
    )

    events = client_for(users["viewer"]).chat(project.pk, rojo=rojo.slug, message="Find it")

    page = [e.data for e in events if e.type == "TOOL_RESULT"][1]
    assert page["ok"]
    assert page["result"]["text"] == BIG[:20_000]
    assert page["result"]["end"] == 20_000
    told = json.loads(fake_provider.requests[2]["messages"][-1]["content"])
    assert told["text"] == BIG[:20_000]
