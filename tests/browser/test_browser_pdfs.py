"""A PDF dropped in the message box goes to the model as its text with page markers and
shows as a chip (name, pages, a download) in the user's bubble, after a reload too; a
regenerate and an edit keep the message's PDF and image; a picked PDF that cannot be read
is refused in the box before any request, and the typed text stays."""

import base64

import pytest
from playwright.sync_api import expect

from rojos.models import Rojo
from rojos.selftest.asks import red_square_png
from tests.support.accessibility import axe_violations
from tests.support.browser import screenshot
from tests.support.fake_provider import stream, text_chunks
from tests.support.helpers import make_rojo
from tests.support.pdfs import pdf_encrypted, pdf_file

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

REPORT = pdf_file(["Summary\nSales rose.", "Details\nIn March."])
PNG = red_square_png(16)
TEXT = (
    '<attached-file name="report.pdf">\n[page 1 of 2]\nSummary\nSales rose.\n'
    "[page 2 of 2]\nDetails\nIn March.\n\n</attached-file>"
)
DROP = """([pdf, png]) => {
  const bytes = (b64) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const data = new DataTransfer();
  data.items.add(new File([bytes(pdf)], "report.pdf", { type: "application/pdf" }));
  data.items.add(new File([bytes(png)], "square.png", { type: "image/png" }));
  const form = document.querySelector("form.composer");
  const init = { dataTransfer: data, bubbles: true, cancelable: true };
  form.dispatchEvent(new DragEvent("drop", init));
}"""


def user_content(request: dict):
    return [m for m in request["messages"] if m["role"] == "user"][-1]["content"]


def test_a_dropped_pdf_reaches_the_model_as_text_and_stays_a_chip_through_reload_and_regenerate(
    page_for, users, project, fake_provider
):
    make_rojo(fake_provider.base_url, images=Rojo.Images.YES)
    fake_provider.add(*(stream(*text_chunks(f"Reply {n}.")) for n in range(1, 4)))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    box = page.get_by_label("Message")
    box.fill("What rose?")
    page.evaluate(DROP, [base64.b64encode(REPORT).decode(), base64.b64encode(PNG).decode()])
    tray = page.locator(".composer .image-tray")
    expect(tray.locator(".pdf-chip")).to_have_text("report.pdf · 2 pages")
    expect(tray.locator(".image-thumb")).to_have_count(1)
    screenshot(page, "pdf-dropped")
    box.press("Enter")

    panel = page.locator("rojo-chat-panel")
    expect(panel.locator(".bubble.assistant")).to_have_text("Reply 1.")
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    image = {"type": "image_url", "image_url": {"url": url}}
    asked = [{"type": "text", "text": f"What rose?\n\n{TEXT}"}, image]
    assert user_content(fake_provider.requests[0]) == asked
    expect(tray.locator(".pdf-chip")).to_have_count(0)
    page.reload()  # the conversation is opened again from what is stored
    chip = panel.locator(".bubble.user .pdf-chip")
    expect(chip).to_have_text("report.pdf · 2 pages")
    expect(panel.locator(".bubble.user .image-thumb")).to_have_count(1)
    downloaded = page.request.get(chip.get_attribute("href"))
    assert downloaded.status == 200 and downloaded.body() == REPORT
    assert downloaded.headers["content-type"] == "application/pdf"
    screenshot(page, "pdf-in-the-bubble")
    assert axe_violations(page) == []  # the chip's name, contrast and link

    # A regenerate asks the same question with the same PDF and image.
    panel.get_by_role("button", name="Ask for another reply to this question").click()
    expect(panel.locator(".bubble.assistant")).to_have_text("Reply 2.")
    assert user_content(fake_provider.requests[1]) == asked
    expect(panel.locator(".bubble.user .pdf-chip")).to_have_text("report.pdf · 2 pages")
    # An edit changes the text and keeps them too.
    panel.get_by_role("button", name="Edit and send again").click()
    panel.get_by_label("Edited text").fill("When?")
    panel.locator("form.message-edit").get_by_role("button", name="Send").click()
    expect(panel.locator(".bubble.assistant")).to_have_text("Reply 3.")
    assert user_content(fake_provider.requests[2]) == [
        {"type": "text", "text": f"When?\n\n{TEXT}"},
        image,
    ]
    page.reload()
    expect(panel.locator(".bubble.user .pdf-chip")).to_have_text("report.pdf · 2 pages")
    assert page.console_errors == []


def test_a_picked_pdf_that_cannot_be_read_is_refused_in_the_box(
    page_for, users, project, fake_provider
):
    make_rojo(fake_provider.base_url)
    page = page_for(users["viewer"])
    page.goto(f"/projects/{project.pk}/")
    box = page.get_by_label("Message")
    box.fill("Read these")
    expect(page.get_by_role("button", name="Attach image or PDF")).to_be_visible()
    picker = page.locator(".composer input[type=file]")
    errors = page.locator("rojo-chat-panel .chat-error")

    picker.set_input_files(
        files=[{"name": "notes.pdf", "mimeType": "application/pdf", "buffer": b"just text"}]
    )
    expect(errors).to_contain_text("notes.pdf was not attached: 'notes.pdf' is not a PDF")
    locked = pdf_encrypted(["secret"], "pw")
    picker.set_input_files(
        files=[{"name": "locked.pdf", "mimeType": "application/pdf", "buffer": locked}]
    )
    expect(errors.last).to_contain_text("'locked.pdf': it is encrypted with a password")
    picker.set_input_files(
        files=[{"name": "ok.pdf", "mimeType": "application/pdf", "buffer": REPORT}]
    )
    chips = page.locator(".composer .image-tray .pdf-chip")
    expect(chips).to_have_text("ok.pdf · 2 pages")
    assert axe_violations(page) == []  # the tray's chip and its remove button
    page.get_by_role("button", name="Do not attach this PDF").click()
    expect(chips).to_have_count(0)

    expect(box).to_have_value("Read these")
    assert fake_provider.requests == []
