"""Diagrams and math in replies, in a real Chromium under the app's CSP: a Mermaid flowchart
is drawn as SVG once its block is complete, with its source one click away; a diagram that
does not parse keeps its source and shows the error; `$…$` and `$$…$$` are typeset by KaTeX,
while dollars of prices stay text; a diagram or formula carrying markup runs nothing, and
a diagram's node is no link. No CSP
violation, no console error, and the libraries come from the app itself."""

import pytest
from playwright.sync_api import expect

from tests.support.browser import screenshot
from tests.support.fake_provider import stream, text_chunks
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RECORD_VIOLATIONS = """
window.cspViolations = [];
window.ranInjected = false;
document.addEventListener("securitypolicyviolation", (e) => {
  window.cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`);
});
"""

REPLY = r"""The flow:

```mermaid
flowchart LR
  A[Read the files] --> B{Tests pass?}
  B -- yes --> C[Ship it]
  B -- no --> A
```

Energy is $E = mc^2$, and the sum:

$$
\sum_{k=1}^{n} k = \frac{n(n+1)}{2}
$$

Prices stay prices: it costs $5 and $10.

```mermaid
flowchart LR
  A -->
  this is not mermaid ((
```
"""

HOSTILE = r"""```mermaid
flowchart LR
  A["<img src=x onerror=window.ranInjected=true>"] --> B["<script>window.ranInjected=true</script>"]
  click A call alert("x")
  C["Your session expired: sign in again"] --> D["Settings"]
  click C "https://evil.example/login"
  click D "/projects/1/settings/"
```

And $\href{javascript:window.ranInjected=true}{x}$ with $\htmlId{evil}{y}$.
"""


def ask(page, project, question: str) -> None:
    page.goto(f"/projects/{project.pk}/")
    page.get_by_label("Message").fill(question)
    page.keyboard.press("Enter")
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()


def test_a_flowchart_and_math_render_with_no_csp_violation(
    page_for, users, project, fake_provider, asgi_server
):
    make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks(REPLY, pieces=25), delay=0.01))
    page = page_for(users["editor"])
    page.add_init_script(RECORD_VIOLATIONS)
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    ask(page, project, "Draw it")
    reply = page.locator("rojo-chat-panel .bubble.assistant")

    diagram = reply.locator(".diagram").first
    expect(diagram.locator("svg")).to_be_visible()
    expect(diagram).to_contain_text("Read the files")
    expect(diagram).to_contain_text("Ship it")
    first = reply.locator(".code-block").first
    expect(first.locator("pre")).to_be_hidden()
    first.get_by_role("button", name="Source").click()
    expect(first.locator("pre")).to_be_visible()
    expect(first.locator("pre")).to_contain_text("A[Read the files] --> B{Tests pass?}")
    expect(diagram).to_be_hidden()
    first.get_by_role("button", name="Diagram").click()
    expect(diagram).to_be_visible()

    broken = reply.locator(".code-block").nth(1)
    expect(broken.locator(".diagram-error")).to_contain_text("could not be drawn")
    expect(broken.locator("pre")).to_be_visible()
    expect(broken.locator("pre")).to_contain_text("this is not mermaid")
    # Mermaid's own picture of the error ("Syntax error in text") is not left under the page.
    expect(page.locator("body > div")).to_have_count(0)

    inline = reply.locator("span.math").first
    expect(inline.locator(".katex")).to_be_visible()
    expect(inline).to_have_attribute("title", "E = mc^2")
    display = reply.locator("div.math")
    expect(display.locator(".katex-display")).to_be_visible()
    expect(display.locator("annotation")).to_have_text(r"\sum_{k=1}^{n} k = \frac{n(n+1)}{2}")
    expect(reply).to_contain_text("it costs $5 and $10.")
    expect(reply.locator("span.math")).to_have_count(1)

    # Kept after a reload, and drawn again from the stored reply.
    page.reload()
    reply = page.locator("rojo-chat-panel .bubble.assistant")
    expect(reply.locator(".diagram svg").first).to_be_visible()
    expect(reply.locator("span.math .katex")).to_be_visible()

    screenshot(page, "diagrams-math")
    assert page.evaluate("window.cspViolations") == []
    assert page.console_errors == []
    assert all(url.startswith(asgi_server) or url.startswith("data:") for url in requested)


def test_markup_in_a_diagram_or_formula_runs_nothing(page_for, users, project, fake_provider):
    make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks(HOSTILE, pieces=5)))
    page = page_for(users["editor"])
    page.add_init_script(RECORD_VIOLATIONS)
    ask(page, project, "Try it")
    reply = page.locator("rojo-chat-panel .bubble.assistant")
    block = reply.locator(".code-block").first
    expect(block).to_have_attribute("data-diagram", "drawn")
    expect(reply.locator("span.math .katex")).to_have_count(2)
    expect(reply.locator("img, script, foreignObject, [onerror], [onclick]")).to_have_count(0)
    expect(reply.locator("a[href^='javascript']")).to_have_count(0)
    # A node's link is no link (a same-tab address of the model's choosing); its label stays.
    expect(block.locator(".diagram svg a")).to_have_count(0)
    expect(block.locator(".diagram svg")).to_contain_text("Settings")
    expect(reply.locator("#evil")).to_have_count(0)
    block.locator(".diagram svg").click()
    assert page.evaluate("window.ranInjected") is False
    assert page.dialogs == []
    # Mermaid's own sanitiser (DOMPurify, bundled) parses the labels in a document of its own
    # to strip them; Chromium reports the handler it saw there as blocked by the CSP. Blocked
    # handlers are all it may report: no script, eval, connection or frame was attempted.
    assert set(page.evaluate("window.cspViolations")) <= {"script-src-attr inline"}
