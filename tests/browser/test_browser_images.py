"""An image pasted into the message box goes to the model as an image part and shows as a
thumbnail in the user's bubble, after a reload too, and the export names it; a rojo whose
model takes no images refuses before any request and the image stays in the box."""

import base64

import pytest
from playwright.sync_api import expect

from rojos.models import Conversation, Rojo
from rojos.selftest.asks import red_square_png
from tests.support.browser import screenshot
from tests.support.fake_provider import stream, text_chunks
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PNG = red_square_png(16)
PASTE = """(b64) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const data = new DataTransfer();
  data.items.add(new File([bytes], "square.png", { type: "image/png" }));
  const box = document.querySelector("#message-input");
  const init = { clipboardData: data, bubbles: true, cancelable: true };
  box.dispatchEvent(new ClipboardEvent("paste", init));
}"""


def paste_image(page) -> None:
    page.evaluate(PASTE, base64.b64encode(PNG).decode())
    expect(page.locator(".composer .image-tray .image-thumb")).to_have_count(1)


def loaded(thumb) -> bool:
    return thumb.evaluate("(img) => img.complete && img.naturalWidth === 16")


def test_a_pasted_image_reaches_the_model_and_stays_in_the_bubble(
    page_for, users, project, fake_provider
):
    make_rojo(fake_provider.base_url, images=Rojo.Images.YES)
    fake_provider.add(stream(*text_chunks("A red square.")))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    box = page.get_by_label("Message")
    box.fill("What is this?")
    paste_image(page)
    screenshot(page, "image-pasted")
    box.press("Enter")

    expect(page.locator("rojo-chat-panel .bubble.assistant")).to_have_text("A red square.")
    user = [m for m in fake_provider.requests[0]["messages"] if m["role"] == "user"][-1]
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert user["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": url}},
    ]
    thumb = page.locator("rojo-chat-panel .bubble.user .image-thumb")
    expect(thumb).to_have_count(1)
    expect(page.locator(".composer .image-tray .image-thumb")).to_have_count(0)
    page.reload()  # the conversation is opened again from what is stored
    thumb = page.locator("rojo-chat-panel .bubble.user .image-thumb")
    expect(thumb).to_have_count(1)
    page.wait_for_function("() => document.querySelector('.bubble.user .image-thumb').complete")
    assert loaded(thumb)
    conversation = Conversation.objects.get().pk
    exported = page.request.get(f"/api/conversations/{conversation}/export").json()
    asked = next(m for m in exported["messages"] if m["role"] == "user")
    assert asked["extra"]["images"][0]["type"] == "image/png"
    assert asked["extra"]["images"][0]["size"] == len(PNG)
    assert page.console_errors == []


def test_a_rojo_that_takes_no_images_refuses_before_any_request(
    page_for, users, project, fake_provider
):
    make_rojo(fake_provider.base_url, images=Rojo.Images.NO)
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    box = page.get_by_label("Message")
    box.fill("Look")
    paste_image(page)
    box.press("Enter")

    expect(page.locator("rojo-chat-panel .chat-error")).to_contain_text("does not take images")
    assert fake_provider.requests == []
    expect(page.locator(".composer .image-tray .image-thumb")).to_have_count(1)  # kept
    expect(box).to_have_value("Look")


DROP = """([gif, png]) => {
  const bytes = (b64) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const data = new DataTransfer();
  data.items.add(new File([bytes(gif)], "dot.gif", { type: "image/gif" }));
  data.items.add(new File([bytes(png)], "square.png", { type: "image/png" }));
  const form = document.querySelector("form.composer");
  const init = { dataTransfer: data, bubbles: true, cancelable: true };
  form.dispatchEvent(new DragEvent("drop", init));
}"""
# A 1x1 red GIF.
GIF = base64.b64decode("R0lGODlhAQABAIAAAP8AAAAAACH5BAAAAAAALAAAAAABAAEAAAICRAEAOw==")


def test_dropped_images_are_attached_and_a_picked_file_that_is_no_image_is_refused(
    page_for, users, project, fake_provider, settings
):
    """Two images dropped at once upload one after the other: the server lets a person
    have only so many uploads under way (here one)."""
    settings.ROJO_UPLOAD_MAX_IN_FLIGHT = 1
    make_rojo(fake_provider.base_url, images=Rojo.Images.YES)
    page = page_for(users["viewer"])
    page.goto(f"/projects/{project.pk}/")
    page.evaluate(DROP, [base64.b64encode(GIF).decode(), base64.b64encode(PNG).decode()])
    tray = page.locator(".composer .image-tray .image-thumb")
    expect(tray).to_have_count(2)

    expect(page.get_by_role("button", name="Attach image")).to_be_visible()
    picker = page.locator(".composer input[type=file]")
    picker.set_input_files(
        files=[{"name": "notes.png", "mimeType": "image/png", "buffer": b"just text"}]
    )

    expect(page.locator("rojo-chat-panel .chat-error")).to_contain_text(
        "notes.png was not attached: that is not an image a model takes"
    )
    expect(tray).to_have_count(2)
    page.get_by_role("button", name="Do not attach this image").first.click()
    expect(tray).to_have_count(1)


def test_an_image_that_cannot_be_read_is_refused_in_the_box(
    page_for, users, project, fake_provider
):
    """Bytes that begin like a PNG but are cut short pass the server's check of their type:
    the box refuses them, naming the file, instead of showing a broken thumbnail and sending
    them to the model."""
    make_rojo(fake_provider.base_url, images=Rojo.Images.YES)
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    picker = page.locator(".composer input[type=file]")
    picker.set_input_files(
        files=[{"name": "cut.png", "mimeType": "image/png", "buffer": PNG[: len(PNG) // 2]}]
    )

    expect(page.locator("rojo-chat-panel .chat-error")).to_contain_text(
        "cut.png was not attached: it begins like an image but cannot be read as one"
    )
    expect(page.locator(".composer .image-tray .image-thumb")).to_have_count(0)
    picker.set_input_files(files=[{"name": "whole.png", "mimeType": "image/png", "buffer": PNG}])
    expect(page.locator(".composer .image-tray .image-thumb")).to_have_count(1)
