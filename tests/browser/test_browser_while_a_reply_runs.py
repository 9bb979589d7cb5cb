"""While a reply runs, in Chromium: a forming write's preview follows its end (unless the
reader scrolled up in it), parallel calls say "N calls at once" as soon as the second one
forms, and the message box takes the next message while the reply runs (Enter queues it)."""

import itertools
import json
import threading

import pytest
from playwright.sync_api import expect

from roject.storage import project_root_create
from tests.support.browser import screenshot
from tests.support.fake_provider import Gate, chunk, stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_TEXT = "".join(f"Paragraph {n}: the rojo is still writing this page.\n" for n in range(120))


@pytest.fixture
def deltas_on(settings):
    settings.ROJO_TOOL_DELTA_SECONDS = 0.1
    return settings


def slow_writes(
    *writes: tuple[str, str],
    pieces: int = 60,
    delay: float = 0.05,
    holds: dict[int, threading.Event] | None = None,
):
    """One response of write_text_content calls (path, text), one after another, each one's
    arguments arriving in `pieces` chunks `delay` seconds apart. `holds` maps a chunk's place
    (each call's opening counts as one) to an event the stream waits for before it, so that
    what the test does while the calls form does not race the provider's pace."""
    chunks = []
    for number, (path, text) in enumerate(writes):
        args = json.dumps({"path": path, "text": text})
        head = {"index": number, "id": f"call_{number}", "type": "function"}
        function = {"name": "write_text_content", "arguments": ""}
        opening = {"tool_calls": [{**head, "function": function}]}
        chunks.append(chunk({"role": "assistant", **opening} if number == 0 else opening))
        cuts = [len(args) * i // pieces for i in range(pieces + 1)]
        chunks += [
            chunk({"tool_calls": [{"index": number, "function": {"arguments": args[a:b]}}]})
            for a, b in itertools.pairwise(cuts)
        ]
    for place, opened in sorted((holds or {}).items(), reverse=True):
        chunks.insert(place, Gate(opened))
    return stream(*chunks, chunk({}, "tool_calls"), delay=delay)


def send(page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_label("Message").press("Enter")


def scrolled_up(preview) -> bool:
    """Scroll the preview to its top as a reader would; True once the page took it as the
    reader's (a write landing before the scroll event scrolls it back to the end)."""
    return preview.evaluate(
        """p => new Promise((ok) => {
            p.addEventListener('scroll', () => ok(p.scrolledUp), { once: true });
            p.scrollTop = 0;
        })"""
    )


PREVIEW_AT_END = """() => {
    const p = document.querySelector('.tool-line.forming .tool-args');
    return p && p.scrollHeight > p.clientHeight + 20
        && p.scrollHeight - p.scrollTop - p.clientHeight <= 4;
}"""


def test_a_forming_writes_preview_follows_its_end_unless_scrolled_up(
    page_for, users, project, fake_provider, deltas_on
):
    """The call's arguments hold three times (once the preview is open, once it followed to
    the end, once it grew under the reader's scroll), so the test never races their pace."""
    make_rojo(fake_provider.base_url, approval_tools=[])
    opened, followed, grown = threading.Event(), threading.Event(), threading.Event()
    fake_provider.add(
        slow_writes(
            ("docs/page.md", LONG_TEXT), pieces=150, holds={11: opened, 76: followed, 121: grown}
        ),
        stream(*text_chunks("Written.")),
    )
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    send(page, "Write the page")
    forming = page.locator(".tool-line.forming")
    forming.locator("summary").click()  # open the collapsed preview
    preview = forming.locator(".tool-args")
    expect(preview).to_contain_text("Paragraph 1: the rojo")
    opened.set()
    # The text outgrows the preview, and the preview shows its newest lines.
    page.wait_for_function(PREVIEW_AT_END)
    screenshot(page, "forming-preview-follows")

    # The reader scrolls up to read an earlier part: the growing text leaves them there.
    assert any(scrolled_up(preview) for _ in range(20))
    size = forming.locator(".outcome").text_content()
    followed.set()
    expect(forming.locator(".outcome")).not_to_have_text(size)  # more text came
    assert forming.count() == 1, "the call ended before the test could look"
    assert preview.evaluate("p => p.scrollTop") == 0
    grown.set()
    expect(page.locator(".bubble.assistant")).to_have_text("Written.", timeout=30_000)
    assert page.console_errors == []


FIRST_LABEL = """
window.__firstLabel = null;
new MutationObserver(() => {
    const label = document.querySelector('.tool-group-label');
    if (window.__firstLabel || !label || !label.textContent) return;
    window.__firstLabel = {
        text: label.textContent,
        complete: document.querySelectorAll('.tool-line:not(.forming)').length,
    };
}).observe(document, { subtree: true, childList: true, characterData: true });
"""


def test_parallel_calls_say_so_as_soon_as_the_second_forms(
    page_for, users, project, fake_provider, deltas_on
):
    """The second call's arguments hold after their first pieces until the label showed, so
    that a slow page cannot take both calls whole at once."""
    make_rojo(fake_provider.base_url, approval_tools=[])
    labelled = threading.Event()
    fake_provider.add(
        slow_writes(("a.md", LONG_TEXT), ("b.md", LONG_TEXT), pieces=40, holds={46: labelled}),
        stream(*text_chunks("Both written.")),
    )
    page = page_for(users["editor"])
    page.add_init_script(FIRST_LABEL)
    page.goto(f"/projects/{project.pk}/")
    send(page, "Write two pages")
    label = page.locator(".tool-group-label")
    expect(label).to_have_text("2 calls at once")
    labelled.set()
    first = page.evaluate("() => window.__firstLabel")
    # Shown while both were still being written, before either call was complete.
    assert first == {"text": "2 calls at once", "complete": 0}
    expect(page.locator(".tool-group .tool-line")).to_have_count(2)
    expect(page.locator(".bubble.assistant")).to_have_text("Both written.", timeout=30_000)
    expect(label).to_have_text("2 calls at once")
    expect(page.locator(".tool-line.forming")).to_have_count(0)
    assert page.console_errors == []


def test_the_next_message_is_typed_while_a_reply_runs_and_sent_after(
    page_for, users, project, fake_provider
):
    """The reply waits on an approval, so it is surely still running while the next
    message is typed: the box takes it, Send waits, Enter queues it (tests/browser/
    test_browser_queue.py has the rest of the queue), and it goes once the reply ends."""
    (project_root_create(project.pk) / "a.md").write_text("old\n")
    make_rojo(fake_provider.base_url)  # a write over an existing file asks first
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "a.md", "text": "A\n"})])),
        stream(*text_chunks("Written.")),
        stream(*text_chunks("Here is the summary.")),
    )
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    send(page, "Write the page")
    panel = page.locator("rojo-chat-panel")
    box = page.get_by_label("Message")
    approve = panel.get_by_role("button", name="Approve")
    expect(approve).to_be_visible()
    expect(box).to_be_editable()
    box.click()
    page.keyboard.type("Now summarise it")
    expect(box).to_have_value("Now summarise it")
    expect(panel.locator(".send")).to_be_disabled()
    box.press("Enter")  # queued: nothing is sent while the reply runs
    expect(box).to_have_value("")
    expect(panel.locator(".queued-text")).to_have_text(["Now summarise it"])
    expect(panel.locator(".bubble.user")).to_have_count(1)
    assert len(fake_provider.requests) == 1

    approve.click()
    expect(panel.locator(".bubble.user")).to_have_count(2)
    expect(panel.locator(".bubble.user").last).to_contain_text("Now summarise it")
    expect(panel.locator(".bubble.assistant")).to_have_text(["Written.", "Here is the summary."])
    expect(panel.locator(".send")).to_be_enabled()
    assert len(fake_provider.requests) == 3
    assert page.console_errors == []
