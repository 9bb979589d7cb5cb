"""Previews in the file panel, in Chromium: a page the rojo wrote shows as a page, with the
pictures and styles beside it, while its script never runs and it can neither read the app's
cookies nor call its API; Markdown renders with its source one click away; a picture and a PDF
show as such; the page the latest turn changed opens from its activity line and its preview
follows the change."""

import pytest
from playwright.sync_api import expect

from roject.storage import project_root_create
from tests.support.browser import screenshot
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.pdfs import pdf_file

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201a3e1f1740000000049454e44ae426082"
)
# What a hostile page would try: run a script, read the cookies, call the app's API, load
# something from elsewhere.
PAGE = """<!doctype html><html><head><title>Site</title>
<link rel="stylesheet" href="css/site.css"></head><body>
<h1>Welcome</h1><img id="logo" src="logo.png" alt="logo">
<img id="outside" src="https://example.invalid/x.png" alt="">
<script>document.title = 'ran ' + document.cookie;
fetch('/api/projects/').then(() => { document.title = 'called'; });</script>
<img src="x" onerror="document.title = 'handler ran'" alt="">
</body></html>
"""


@pytest.fixture
def root(project):
    root = project_root_create(project.pk)
    (root / "site" / "css").mkdir(parents=True)
    (root / "site" / "index.html").write_text(PAGE)
    (root / "site" / "logo.png").write_bytes(PNG)
    (root / "site" / "css" / "site.css").write_text("h1 { color: rgb(0, 128, 128); }")
    (root / "README.md").write_text("# Guide\n\nSome **bold** words.\n")
    (root / "report.pdf").write_bytes(pdf_file(["Page one"]))
    return root


def open_file(page, path: str) -> None:
    parts = path.split("/")
    for depth in range(1, len(parts)):
        folder = page.locator(f'.file-tree li[data-path="{"/".join(parts[:depth])}"] > .entry')
        if folder.get_attribute("aria-expanded") != "true":
            folder.click()
    page.locator(f'.file-tree li[data-path="{path}"] > .entry').click()
    expect(page.locator(".file-viewer .file-name")).to_have_text(path)


def test_a_page_shows_with_its_files_and_runs_nothing(page_for, users, project, root, asgi_server):
    page = page_for(users["viewer"])
    requests: list[str] = []
    page.on("response", lambda response: requests.append(response.url))
    page.goto(f"/projects/{project.pk}/")
    open_file(page, "site/index.html")
    frame_element = page.locator(".file-preview iframe")
    expect(frame_element).to_have_attribute("sandbox", "")
    frame = page.frame_locator(".file-preview iframe")
    expect(frame.locator("h1")).to_have_text("Welcome")
    expect(frame.locator("h1")).to_have_css("color", "rgb(0, 128, 128)")
    expect(frame.locator("#logo")).to_have_js_property("naturalWidth", 1)
    expect(frame.locator("#logo")).to_have_js_property("complete", True)
    content = frame_element.element_handle().content_frame()
    assert content.url.startswith(f"{asgi_server}/preview/")
    assert content.title() == "Site"  # no script, no handler changed it
    assert not [url for url in requests if "example.invalid" in url]
    assert not [url for url in requests if url.endswith("/api/projects/")]
    # The source is one click away, and back.
    page.locator(".preview-toggle").click()
    expect(page.locator(".file-content")).to_contain_text("<h1>Welcome</h1>")
    expect(page.locator(".file-preview")).to_be_hidden()
    page.locator(".preview-toggle").click()
    expect(page.locator(".file-preview")).to_be_visible()
    screenshot(page, "preview-page")


def test_markdown_a_picture_and_a_pdf_preview_as_themselves(page_for, users, project, root):
    page = page_for(users["viewer"])
    page.goto(f"/projects/{project.pk}/")
    open_file(page, "README.md")
    expect(page.locator(".file-preview .markdown h3")).to_have_text("Guide")
    expect(page.locator(".file-preview .markdown strong")).to_have_text("bold")
    page.locator(".preview-toggle").click()
    expect(page.locator(".file-content")).to_have_text("# Guide\n\nSome **bold** words.\n")

    open_file(page, "site/logo.png")
    image = page.locator(".file-preview img")
    expect(image).to_have_js_property("naturalWidth", 1)
    expect(page.locator(".preview-toggle")).to_be_hidden()  # a picture has no source to show
    expect(page.locator(".file-viewer .file-meta")).to_contain_text("B · modified")

    with page.expect_response(lambda response: response.url.endswith("/report.pdf")) as pdf:
        open_file(page, "report.pdf")
    assert pdf.value.status == 200
    frame = page.locator(".file-preview iframe")
    src = frame.get_attribute("src")
    assert src.startswith("/preview/") and src.endswith("/report.pdf")
    expect(frame).not_to_have_attribute("sandbox", "")  # the browser's PDF viewer needs it


def test_the_changed_page_opens_from_its_activity_line_and_follows_the_change(
    page_for, users, project, root, fake_provider
):
    make_rojo(fake_provider.base_url, approval_tools=[])  # the page changes without a question
    new_page = "<!doctype html><title>Site</title><h1>Version two</h1>"
    fake_provider.add(
        stream(
            *tool_call_chunks(
                [("write_text_content", {"path": "site/index.html", "text": new_page})]
            )
        ),
        stream(*text_chunks("Rewritten.")),
    )
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    open_file(page, "site/index.html")
    frame = page.frame_locator(".file-preview iframe")
    expect(frame.locator("h1")).to_have_text("Welcome")
    page.get_by_label("Message").fill("Rewrite the page")
    page.keyboard.press("Enter")
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()
    # The turn's end drawn (its Regenerate, which scrolls a log at its end), before clicking
    # in the log: a click as it scrolled landed beside its target under load.
    expect(page.get_by_role("button", name="Regenerate")).to_be_visible()
    # The open preview followed the change (the live news of the project's files).
    expect(frame.locator("h1")).to_have_text("Version two")
    page.locator(".close-file").click()
    expect(page.locator(".file-viewer")).to_be_hidden()
    line = page.locator(".tool-line").first
    line.locator("summary").click()
    line.get_by_role("button", name="Open site/index.html in the file panel").click()
    expect(page.locator(".file-viewer")).to_be_visible()
    expect(page.locator(".file-viewer .file-name")).to_have_text("site/index.html")
    expect(frame.locator("h1")).to_have_text("Version two")
