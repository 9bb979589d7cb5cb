"""The chat panel in a real browser: the verification story, as a user sees it."""

import threading

import pytest
from playwright.sync_api import expect

from roject.storage import project_root
from tests.support.browser import MainThreadTasks, screenshot
from tests.support.fake_provider import Gate, stream, text_chunks, tool_call_chunks
from tests.support.helpers import PAGE, STORY, make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

REPLY = "I created **docs/intro/index.page** with:\n\n- a page header\n- a short intro paragraph"


def test_log_in_and_see_my_projects(page_for, users, project):
    page = page_for()
    page.goto("/")
    expect(page).to_have_url("/login/?next=/")
    page.get_by_label("Username").fill("editor")
    page.get_by_label("Password").fill("pw-editor")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("link", name="Demo Project")).to_be_visible()
    expect(page.locator(".project-list")).to_contain_text("Editor")


def test_verification_story_in_the_browser(page_for, users, project, fake_provider):
    """The story, live: the reply's text holds half-way until the page showed the turn still
    running (a slow page could otherwise look only after its end)."""
    rojo = make_rojo(fake_provider.base_url)
    mid_seen = threading.Event()
    reply_chunks = text_chunks(REPLY, pieces=20)
    fake_provider.add(
        stream(*tool_call_chunks([("create_directory", {"path": "docs/intro"})])),
        stream(
            *tool_call_chunks(
                [("write_text_content", {"path": "docs/intro/index.page", "text": PAGE})]
            )
        ),
        stream(*reply_chunks[:10], Gate(mid_seen), *reply_chunks[10:], delay=0.03),
    )
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    expect(page.locator("#rojo-picker")).to_have_value(str(rojo.pk))

    page.get_by_label("Message").fill(STORY)
    page.keyboard.press("Enter")

    panel = page.locator("rojo-chat-panel")
    expect(panel.locator(".bubble.user")).to_have_text(STORY)
    lines = panel.locator(".tool-line")
    expect(lines.nth(0)).to_contain_text('create_directory("docs/intro") → ok')
    expect(lines.nth(1)).to_contain_text('write_text_content("docs/intro/index.page", …) → ok')
    expect(panel.locator(".busy")).to_be_visible()
    screenshot(page, "story-mid-conversation")
    mid_seen.set()
    reply = panel.locator(".bubble.assistant")
    expect(reply.locator("strong")).to_have_text("docs/intro/index.page")
    expect(reply.locator("li")).to_have_text(["a page header", "a short intro paragraph"])
    expect(panel.locator(".busy")).to_be_hidden()
    expect(page.get_by_label("Message")).to_be_editable()

    assert (project_root(project.pk) / "docs/intro/index.page").read_text() == PAGE
    tree = page.locator(".file-tree")
    tree.get_by_role("button", name="docs").click()
    tree.get_by_role("button", name="intro").click()
    tree.get_by_role("button", name="index.page").click()
    expect(page.locator(".file-content")).to_have_text(PAGE)
    expect(page.locator(".file-meta")).to_contain_text(f"{len(PAGE.encode())} B")
    screenshot(page, "story-after")

    lines.nth(1).locator("summary").click()
    expect(lines.nth(1).locator(".tool-args")).to_contain_text('"path": "docs/intro/index.page"')
    assert page.console_errors == []


def test_underscores_inside_names_are_not_emphasis(page_for, users, project, fake_provider):
    """File and variable names are full of underscores; only word-edge ones emphasise, as in
    CommonMark (which makes __init__.py a bold "init" too)."""
    make_rojo(fake_provider.base_url)
    reply = "See tests/browser/test_browser_chat.py and my_var_name; _this_ and __that__."
    fake_provider.add(stream(*text_chunks(reply)))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    page.get_by_label("Message").fill("Where?")
    page.keyboard.press("Enter")

    bubble = page.locator(".bubble.assistant")
    expect(bubble).to_have_text(
        "See tests/browser/test_browser_chat.py and my_var_name; this and that."
    )
    expect(bubble.locator("em")).to_have_text(["this"])
    expect(bubble.locator("strong")).to_have_text(["that"])


RICH_REPLY = """# Plan

Some **bold** text and `code`,
on two lines.

- one
- two
  continued

```python
def f():

    return 1
```

> quoted
> more

1. first
2. second

---

The end, with a [link](https://example.com) and _emphasis_."""


def test_a_reply_rendered_as_it_streams_ends_as_if_rendered_whole(
    page_for, users, project, fake_provider
):
    """Only the part after the last blank line outside a code fence is rendered again as a
    reply grows; the result must not differ from rendering it whole."""
    make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks(RICH_REPLY, pieces=60), delay=0.01))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    page.get_by_label("Message").fill("Plan it")
    page.keyboard.press("Enter")
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()
    bubble = page.locator(".bubble.assistant")

    whole = page.evaluate(
        """async (text) => {
            const { renderMarkdown } = await import("/static/rojo/markdown.js");
            const box = document.createElement("div");
            renderMarkdown(text, box);
            return box.innerHTML;
        }""",
        RICH_REPLY,
    )

    assert bubble.locator(".message-body").evaluate("b => b.innerHTML") == whole
    assert bubble.locator("pre code").text_content() == "def f():\n\n    return 1"
    assert bubble.get_attribute("data-text") == RICH_REPLY


def long_reply(size: int = 95_000) -> str:
    """Sections of headings, prose with bold, code and links, lists and code, to `size` chars."""
    line = (
        "Some **bold** text with `code`, a [link](https://example.com/a) and more words, "
        "enough of them to make a paragraph of ordinary length.\n"
    )
    sections = []
    while sum(map(len, sections)) < size:
        sections.append(
            f"## Section {len(sections) + 1}\n\n{line * 3}\n- one\n- two\n\n"
            "```python\ndef f():\n    return 1\n```\n\n"
        )
    return "".join(sections)


def test_a_long_reply_streams_without_stalling_the_page(
    browser, page_for, users, project, fake_provider
):
    """A 95 KB reply in 2,000 chunks: the blocks before the last are rendered once, so the
    work per frame does not grow with the reply, and no main-thread task takes half as long
    as rendering the whole reply once in the same page (measured with the hand-written
    renderer: 5,400 elements made for a reply of 4,200; rendering it whole each frame made
    85,000 and held the main thread 2.1-3.8 s in all, in tasks of up to 0.56 s; with
    markdown-it the longest task is about 30 ms on an idle machine, and was 51 ms once with
    another test run beside it)."""
    text = long_reply()
    make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks(text, pieces=2000), delay=0.001))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    page.evaluate(
        """() => {
            window.made = 0; // elements put into the log, counted with those inside them
            new MutationObserver((records) => {
                for (const record of records) {
                    for (const node of record.addedNodes) {
                        if (node.nodeType !== 1) continue;
                        window.made += 1 + node.querySelectorAll("*").length;
                    }
                }
            }).observe(document.querySelector(".messages"), { childList: true, subtree: true });
        }"""
    )
    page.get_by_label("Message").fill("Write it all")
    with MainThreadTasks(browser, page) as tasks:
        page.keyboard.press("Enter")
        first = page.locator(".bubble.assistant h4").first
        expect(first).to_have_text("Section 1")
        # Kept once a later block has begun (until then it is the growing tail, drawn again
        # each frame): the element taken now must be the one still there at the end.
        expect(page.locator(".bubble.assistant h4").nth(1)).to_have_text("Section 2")
        first.evaluate("h => { window.firstHeading = h; }")
        expect(page.locator("rojo-chat-panel .busy")).to_be_hidden(timeout=60_000)

    bubble = page.locator(".bubble.assistant")
    assert bubble.get_attribute("data-text") == text
    assert first.evaluate("h => h === window.firstHeading && h.isConnected")
    final = bubble.evaluate("b => b.querySelectorAll('*').length")
    made = page.evaluate("window.made")
    assert made < 3 * final, f"{made} elements made for a reply of {final}"
    # The reference, in the same page and run: rendering the whole reply once. A page that
    # re-rendered what it kept held the main thread that long per task; streaming, the
    # longest task is a small part of it.
    whole_ms = page.evaluate(
        """async (text) => {
            const { renderMarkdown } = await import("/static/rojo/markdown.js");
            const started = performance.now();
            renderMarkdown(text, document.createElement("div"));
            return performance.now() - started;
        }""",
        text,
    )
    assert tasks.cpu_ms, "no task traced"
    assert tasks.longest() < whole_ms / 2, (
        f"a task took {tasks.longest():.0f} ms of CPU; rendering it whole {whole_ms:.0f} ms"
    )
