"""Activity lines in Chromium, as a person sees them: a call shown while the model writes it,
parallel calls grouped, an opened line with its arguments and its result (diff, error in
full), approvals that name the file and answer to A and D, "allow for this conversation", a
write that changes nothing not asking, and "Undo this turn" asking first."""

import itertools
import json
import re
import threading

import pytest
from playwright.sync_api import expect

from roject.storage import project_root_create
from rojos.models import Conversation
from tests.support.big_results import BIG
from tests.support.browser import screenshot
from tests.support.fake_provider import Gate, chunk, stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_TEXT = "".join(f"Paragraph {n}: the rojo is still writing this page.\n" for n in range(80))


@pytest.fixture
def deltas_on(settings):
    settings.ROJO_TOOL_DELTA_SECONDS = 0.1
    return settings


def open_chat(page, project, conversation_id=None):
    suffix = f"c/{conversation_id}/" if conversation_id else ""
    page.goto(f"/projects/{project.pk}/{suffix}")


def send(page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_label("Message").press("Enter")


def slow_write(
    path: str, text: str, *, pieces: int = 60, delay: float = 0.06, gate: Gate | None = None
):
    """One write_text_content call whose arguments take `pieces * delay` seconds to arrive;
    a `gate` holds the second half until the test opens it, so that what a test does while
    the call forms does not race the provider's pace."""
    args = json.dumps({"path": path, "text": text})
    head = {"index": 0, "id": "call_slow", "type": "function"}
    cuts = [len(args) * i // pieces for i in range(pieces + 1)]
    parts = [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[a:b]}}]})
        for a, b in itertools.pairwise(cuts)
    ]
    first = chunk(
        {
            "role": "assistant",
            "tool_calls": [{**head, "function": {"name": "write_text_content", "arguments": ""}}],
        }
    )
    if gate is not None:
        parts.insert(pieces // 2, gate)
    return stream(first, *parts, chunk({}, "tool_calls"), delay=delay)


def test_a_tool_call_shows_while_its_arguments_stream(
    page_for, users, project, fake_provider, deltas_on
):
    """Before the arguments end (the provider is paced), the line shows the tool, the path,
    a growing size, and the text being written in its collapsed preview. The call's second
    half waits until the first half was seen, so a slow browser cannot miss it."""
    root = project_root_create(project.pk)
    make_rojo(fake_provider.base_url, approval_tools=[])
    half_seen = threading.Event()
    fake_provider.add(
        slow_write("docs/page.md", LONG_TEXT, gate=Gate(half_seen)),
        stream(*text_chunks("Written.")),
    )
    page = page_for(users["editor"])
    open_chat(page, project)
    send(page, "Write the page")

    forming = page.locator(".tool-line.forming")
    expect(forming.locator(".call")).to_have_text('write_text_content("docs/page.md", …)')
    expect(forming.locator(".outcome")).to_contain_text("characters so far")
    first_size = forming.locator(".outcome").text_content()
    forming.locator("summary").click()  # open the collapsed preview
    expect(forming.locator(".tool-args")).to_contain_text("Paragraph 1: the rojo")
    assert not (root / "docs/page.md").exists()  # the arguments have not ended
    screenshot(page, "activity-forming-call")
    half_seen.set()
    expect(forming.locator(".outcome")).not_to_have_text(first_size)  # it grows

    line = page.locator(".tool-line")
    expect(line).to_have_count(1)
    expect(line.locator("summary")).to_contain_text('write_text_content("docs/page.md", …) → ok')
    expect(page.locator(".tool-line.forming")).to_have_count(0)
    expect(page.locator(".bubble.assistant")).to_have_text("Written.")
    assert (root / "docs/page.md").read_text() == LONG_TEXT
    assert page.console_errors == []


def test_parallel_calls_are_grouped_and_an_opened_line_shows_its_result(
    page_for, users, project, fake_provider
):
    """Three calls of one response sit in one group; opened, a write shows its diff, a read
    error its whole message (the line cuts it), a listing its JSON; Undo is on the row."""
    root = project_root_create(project.pk)
    (root / "notes.md").write_text("keep\nold\n")
    make_rojo(fake_provider.base_url, approval_tools=[])
    missing = "missing/" + "very-long-folder-name/" * 12 + "end.txt"
    calls = [
        ("write_text_content", {"path": "notes.md", "text": "keep\nnew\n"}),
        ("get_text_content", {"path": missing}),
        ("list_files", {"path": ""}),
    ]
    fake_provider.add(stream(*tool_call_chunks(calls)), stream(*text_chunks("All three.")))
    page = page_for(users["editor"])
    open_chat(page, project)
    send(page, "Three things at once")
    expect(page.locator(".bubble.assistant")).to_have_text("All three.")

    group = page.locator(".tool-group")
    expect(group).to_have_count(1)
    expect(group.locator(".tool-group-label")).to_have_text("3 calls at once")
    lines = group.locator(".tool-line")
    expect(lines).to_have_count(3)
    assert page.console_errors == []
    expect(group.locator(".tool-line + button.undo").first).to_be_visible()  # under its line

    lines.nth(0).locator("summary .call").click()
    diff = lines.nth(0).locator(".tool-result .diff")
    expect(diff.locator(".removed")).to_have_text("-old\n")
    expect(diff.locator(".added")).to_have_text("+new\n")
    expect(lines.nth(0).locator(".tool-args")).to_contain_text('"path": "notes.md"')

    lines.nth(1).locator("summary").click()
    error = lines.nth(1).locator(".tool-error")
    expect(error).to_contain_text("end.txt")  # the whole message, not cut
    expect(lines.nth(1).locator(".outcome")).not_to_contain_text("end.txt")
    lines.nth(2).locator("summary").click()
    expect(lines.nth(2).locator(".tool-output")).to_contain_text('"notes.md"')
    screenshot(page, "activity-group-opened")

    # Reopened, the same group and results.
    reopened = page_for(users["editor"])
    open_chat(reopened, project, Conversation.objects.get().pk)
    expect(reopened.locator(".tool-group .tool-line")).to_have_count(3)
    expect(reopened.locator(".tool-group-label")).to_have_text("3 calls at once")
    assert page.console_errors == [] and reopened.console_errors == []


def overwrite(path: str, text: str):
    return stream(*tool_call_chunks([("write_text_content", {"path": path, "text": text})]))


def test_approvals_name_the_file_and_answer_to_a_and_d(page_for, users, project, fake_provider):
    """The question names the file; A typed in the message box is text, not a decision;
    A outside it approves, D denies; the list marks the conversation while it waits."""
    root = project_root_create(project.pk)
    (root / "a.md").write_text("old a\n")
    (root / "b.md").write_text("old b\n")
    make_rojo(fake_provider.base_url)
    fake_provider.add(
        overwrite("a.md", "new a\n"),
        overwrite("b.md", "new b\n"),
        stream(*text_chunks("Done.")),
    )
    page = page_for(users["editor"])
    open_chat(page, project)
    send(page, "Rewrite both")

    approval = page.locator(".approval")
    expect(approval.locator(".approval-question")).to_have_text(
        "The rojo wants to run write_text_content on a.md; it changes existing files."
    )
    expect(approval.get_by_role("button", name="Approve")).to_have_attribute(
        "aria-keyshortcuts", "a"
    )
    waiting = page.locator(".conversation-list li.approval-waiting")
    expect(waiting).to_have_count(1)
    screenshot(page, "approval-names-the-file")
    page.get_by_label("Message").press("a")  # typing: not an answer
    page.wait_for_timeout(300)
    expect(approval).to_have_count(1)
    assert (root / "a.md").read_text() == "old a\n"

    page.locator(".messages").click(position={"x": 5, "y": 5})
    page.keyboard.press("a")
    expect(page.locator(".tool-line").nth(0)).to_contain_text("→ ok")
    expect(approval.locator(".approval-question")).to_contain_text("b.md")
    page.keyboard.press("d")
    expect(page.locator(".tool-line").nth(1)).to_contain_text("→ error: denied by the user")
    expect(page.locator(".bubble.assistant")).to_have_text("Done.")
    expect(waiting).to_have_count(0)
    assert (root / "a.md").read_text() == "new a\n"
    assert (root / "b.md").read_text() == "old b\n"


def test_allow_for_this_conversation_and_no_change_writes_do_not_ask(
    page_for, users, project, fake_provider
):
    """After "Allow for this conversation", the next write runs without a question; a write
    of a file's own text never asks; a reload keeps the allowance (it is stored)."""
    root = project_root_create(project.pk)
    for name in ("a.md", "b.md", "same.md"):
        (root / name).write_text(f"old {name}\n")
    make_rojo(fake_provider.base_url)
    fake_provider.add(
        overwrite("same.md", "old same.md\n"),
        overwrite("a.md", "new\n"),
        overwrite("b.md", "new\n"),
        stream(*text_chunks("Done.")),
    )
    page = page_for(users["editor"])
    open_chat(page, project)
    send(page, "Rewrite them")

    lines = page.locator(".tool-line")
    expect(lines.nth(0)).to_contain_text('write_text_content("same.md", …) → ok')
    approval = page.locator(".approval")
    expect(approval).to_have_count(1)
    expect(approval).to_contain_text("a.md")
    approval.get_by_role("button", name="Allow for this conversation").click()
    expect(page.locator(".bubble.assistant")).to_have_text("Done.")
    expect(lines).to_have_count(3)
    expect(lines.nth(2)).to_contain_text('write_text_content("b.md", …) → ok')
    expect(approval).to_have_count(0)
    assert (root / "b.md").read_text() == "new\n"
    assert Conversation.objects.get().allowed_tools == ["write_text_content"]


def test_undo_this_turn_asks_first_listing_the_files(page_for, users, project, fake_provider):
    """The turn's Undo names the files it would put back; Cancel or Esc leaves them, and the
    focus goes back to the turn's Undo; confirming undoes the turn."""
    root = project_root_create(project.pk)
    make_rojo(fake_provider.base_url, approval_tools=[])
    fake_provider.add(
        overwrite("one.md", "1\n"),
        stream(*tool_call_chunks([("move_path", {"source": "one.md", "destination": "two.md"})])),
        stream(*text_chunks("Moved.")),
    )
    page = page_for(users["editor"])
    open_chat(page, project)
    send(page, "Write and move")
    expect(page.locator(".bubble.assistant")).to_have_text("Moved.")

    page.get_by_role("button", name="Undo this turn").click()
    confirm = page.get_by_role("group", name="Undo this turn?")
    expect(confirm.locator("li")).to_have_text(["one.md", "two.md"])
    screenshot(page, "undo-turn-confirm")
    confirm.get_by_role("button", name="Cancel").click()
    expect(confirm).to_have_count(0)
    assert (root / "two.md").read_text() == "1\n"

    page.get_by_role("button", name="Undo this turn").click()
    expect(confirm.get_by_role("button", name="Undo these changes")).to_be_focused()
    page.keyboard.press("Escape")
    expect(confirm).to_have_count(0)
    expect(page.get_by_role("button", name="Undo this turn")).to_be_focused()
    assert (root / "two.md").read_text() == "1\n"

    page.get_by_role("button", name="Undo this turn").click()
    page.get_by_role("button", name="Undo these changes").click()
    expect(page.locator(".tool-line.undone")).to_have_count(2)
    expect(page.get_by_role("button", name="Undo this turn")).to_have_count(0)
    assert not (root / "one.md").exists() and not (root / "two.md").exists()
    assert page.console_errors == []


def test_a_forming_call_shows_on_a_page_opened_mid_call(
    page_for, users, project, fake_provider, deltas_on
):
    """A reload while a call is still being written shows its forming line again. The call's
    second half waits until the reopened page shows it (a loaded machine took longer to open
    the page than the provider took to write the call)."""
    make_rojo(fake_provider.base_url, approval_tools=[])
    half_sent = threading.Event()
    fake_provider.add(
        slow_write("docs/late.md", LONG_TEXT, pieces=80, gate=Gate(half_sent)),
        stream(*text_chunks("Written.")),
    )
    page = page_for(users["editor"])
    open_chat(page, project)
    send(page, "Write late.md")
    expect(page.locator(".tool-line.forming")).to_have_count(1)
    conversation = Conversation.objects.get()

    reopened = page_for(users["editor"])
    open_chat(reopened, project, conversation.pk)
    forming = reopened.locator(".tool-line.forming .call")
    expect(forming).to_have_text('write_text_content("docs/late.md", …)')
    half_sent.set()
    expect(reopened.locator(".tool-line")).to_contain_text(re.compile("→ ok"), timeout=15_000)
    expect(reopened.locator(".tool-line")).to_have_count(1)
    # The turn's next step asks for the reply after the call: the test ends once it shows.
    expect(reopened.locator(".bubble.assistant")).to_have_text("Written.")


def test_hidden_characters_in_a_forming_call_and_its_question_show_as_escapes(
    page_for, users, project, fake_provider, deltas_on
):
    """A path with a right-to-left override shows ⟨U+202E⟩ on the forming line, in the
    approval's question and in the turn's undo confirmation, never as the reordering. The
    call's second half waits until the forming line was seen."""
    root = project_root_create(project.pk)
    path = "notes\u202etxt.md"
    (root / path).write_text("old\n")
    make_rojo(fake_provider.base_url)
    forming_seen = threading.Event()
    fake_provider.add(
        slow_write(path, "new\n" * 300, pieces=40, gate=Gate(forming_seen)),
        stream(*text_chunks("Done.")),
    )
    page = page_for(users["editor"])
    open_chat(page, project)
    send(page, "Rewrite it")

    shown = "notes⟨U+202E⟩txt.md"
    expect(page.locator(".tool-line.forming .call")).to_have_text(
        f'write_text_content("{shown}", …)'
    )
    forming_seen.set()
    question = page.locator(".approval .approval-question")
    expect(question).to_have_text(
        f"The rojo wants to run write_text_content on {shown}; it changes existing files."
    )
    page.get_by_role("button", name="Approve").click()
    expect(page.locator(".bubble.assistant")).to_have_text("Done.")
    page.get_by_role("button", name="Undo this turn").click()
    expect(page.get_by_role("group", name="Undo this turn?").locator("li")).to_have_text([shown])
    assert "\u202e" not in page.locator(".messages").inner_text()


def test_a_paged_result_shows_its_head_and_links_the_whole(
    page_for, users, project, fake_provider, big_search
):
    """A 3 MB result on its activity line: its size, its head, and a link that opens all of
    it (the model got only the head)."""
    make_rojo(fake_provider.base_url, tools=["big_search"])
    fake_provider.add(
        stream(*tool_call_chunks([("big_search", {})])), stream(*text_chunks("Found it."))
    )
    page = page_for(users["viewer"])
    open_chat(page, project)
    send(page, "Search everything")
    expect(page.locator(".bubble.assistant")).to_have_text("Found it.")

    line = page.locator(".tool-line")
    line.locator("summary").click()
    expect(line.locator(".tool-paged")).to_contain_text(f"{len(BIG.encode()):,} bytes")
    expect(line.locator(".tool-output")).to_contain_text(BIG.splitlines()[0])
    link = line.locator(".tool-paged a")
    expect(link).to_have_text("Open the whole result")
    whole = page.request.get(link.get_attribute("href"))
    assert whole.ok and whole.text() == BIG
    assert page.console_errors == []
