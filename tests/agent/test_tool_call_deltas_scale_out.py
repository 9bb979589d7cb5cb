"""Forming tool calls across two server processes (PostgreSQL + Redis): a client that
re-attaches through the process not running the turn gets its TOOL_CALL_DELTA events too,
and a page opened there shows the forming line."""

import itertools
import json
import os

import pytest
from django.db import connection
from playwright.sync_api import expect

from roject.storage import project_root_create
from rojos.models import Conversation
from tests.support.fake_provider import chunk, stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import parse_sse, read_until

# Marked here: the server is taken once the skip is decided, not named by the tests.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]

TEXT = "".join(f"line {n} of a page being written\n" for n in range(60))

# The second process; no test here stops it or sets its settings, so they share the module's.
MODULE_SERVER_ENV = {"ROJO_PROVIDER_RETRIES": "0", "ROJO_TOOL_DELTA_SECONDS": "0.05"}


@pytest.fixture
def other_process(request, settings):
    """A second server process; the turn runs on the in-process one, shown every 0.05 s
    (taken once the skip is decided: a run without PostgreSQL and Redis starts none)."""
    if not os.environ.get("REDIS_URL") or connection.vendor != "postgresql":
        pytest.skip("scale-out runs with REDIS_URL and a PostgreSQL DATABASE_URL set")
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_TOOL_DELTA_SECONDS = 0.05
    return request.getfixturevalue("module_server")


def slow_write(path: str, pieces: int = 60, delay: float = 0.05):
    args = json.dumps({"path": path, "text": TEXT})
    cuts = [len(args) * i // pieces for i in range(pieces + 1)]
    head = {"index": 0, "id": "call_far", "type": "function"}
    first = {**head, "function": {"name": "write_text_content", "arguments": ""}}
    parts = [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[a:b]}}]})
        for a, b in itertools.pairwise(cuts)
    ]
    return stream(
        chunk({"role": "assistant", "tool_calls": [first]}),
        *parts,
        chunk({}, "tool_calls"),
        delay=delay,
    )


def test_reattaching_through_the_other_process_shows_the_forming_call(
    other_process, client_for, users, project, fake_provider
):
    """Mid-call, a re-attach from the start through process two replays the deltas so far
    and relays the next ones, before the TOOL_CALL that supersedes them."""
    rojo = make_rojo(fake_provider.base_url, approval_tools=[])
    fake_provider.add(slow_write("far/page.md"), stream(*text_chunks("Written.")))
    on_one = client_for(users["editor"])
    on_two = client_for(users["editor"], base_url=other_process.base_url)

    with on_one.chat_stream(project.pk, rojo=rojo.slug, message="Write it") as response:
        seen = read_until(parse_sse(response.iter_lines()), "TOOL_CALL_DELTA")
    conversation = seen[0].data["conversation"]

    with on_two.http.stream("GET", f"/api/conversations/{conversation}/stream") as response:
        relayed = list(parse_sse(response.iter_lines()))

    kinds = [e.type for e in relayed]
    assert kinds[0] == "START" and kinds[-1] == "DONE"
    call_at = kinds.index("TOOL_CALL")
    deltas = [e for e in relayed[:call_at] if e.type == "TOOL_CALL_DELTA"]
    assert len(deltas) >= 2
    assert deltas[0].data["name"] == "write_text_content"
    assert any(d.data.get("path") == "far/page.md" for d in deltas)
    assert TEXT.startswith("".join(d.data.get("text", "") for d in deltas))
    assert relayed[call_at].data["id"] == deltas[0].data["id"] == "call_far"


@pytest.mark.browser
def test_a_page_on_the_other_process_shows_the_forming_line(
    other_process, page_for, users, project, fake_provider
):
    """A person who opens the conversation through process two while the call is being
    written sees its forming line, then the finished call."""
    rojo = make_rojo(fake_provider.base_url, approval_tools=[])
    fake_provider.add(slow_write("far/seen.md", pieces=200), stream(*text_chunks("Written.")))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    page.get_by_label("Message").fill("Write it")
    page.get_by_label("Message").press("Enter")
    expect(page.locator(".tool-line.forming")).to_have_count(1)
    conversation = Conversation.objects.get(rojo=rojo)

    elsewhere = page_for(users["editor"])
    elsewhere.goto(f"{other_process.base_url}/projects/{project.pk}/c/{conversation.pk}/")
    forming = elsewhere.locator(".tool-line.forming")
    expect(forming.locator(".call")).to_have_text('write_text_content("far/seen.md", …)')
    expect(forming.locator(".outcome")).to_contain_text("characters so far")
    expect(elsewhere.locator(".tool-line")).to_contain_text("→ ok", timeout=30_000)
    expect(elsewhere.locator(".bubble.assistant")).to_have_text("Written.")


def test_the_other_process_lists_a_waiting_approval_and_the_allowance(
    other_process, client_for, users, project, fake_provider
):
    """While a call waits on process one, process two's list says waiting_approval; allowed
    for the conversation through process two, the turn's next write does not ask."""
    root = project_root_create(project.pk)
    (root / "a.txt").write_text("old\n")
    (root / "b.txt").write_text("old\n")
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "a.txt", "text": "new\n"})])),
        stream(*tool_call_chunks([("write_text_content", {"path": "b.txt", "text": "new\n"})])),
        stream(*text_chunks("Done.")),
    )
    on_one = client_for(users["editor"])
    on_two = client_for(users["editor"], base_url=other_process.base_url)
    with on_one.chat_stream(project.pk, rojo=rojo.slug, message="Rewrite") as response:
        events = parse_sse(response.iter_lines())
        seen = read_until(events, "APPROVAL_REQUIRED")
        conversation = seen[0].data["conversation"]
        listed = on_two.get(f"/api/projects/{project.pk}/conversations").json()
        assert [c["waiting_approval"] for c in listed if c["id"] == conversation] == [True]
        decided = on_two.post(
            f"/api/conversations/{conversation}/approve",
            json={"call": seen[-1].data["id"], "approve": True, "allow_for_conversation": True},
        )
        assert decided.status_code == 200, decided.text
        rest = list(events)
    assert "APPROVAL_REQUIRED" not in [e.type for e in rest]
    assert (root / "b.txt").read_text() == "new\n"
    listed = on_two.get(f"/api/projects/{project.pk}/conversations").json()
    (entry,) = [c for c in listed if c["id"] == conversation]
    assert entry["waiting_approval"] is False
    assert entry["allowed_tools"] == ["write_text_content"]
