"""The page says a count of one in the singular: "1 token in", "1 reasoning token",
"1 earlier message is sent as this summary", "1 file unpacked" (static/rojo/counted.js).

Each read "1 tokens", "1 files" and so on before; the Python side's counts are
tests/web/test_counts_in_words.py's.
"""

import io
import zipfile

import pytest
from playwright.sync_api import expect

from roject.storage import project_root_create
from rojos.models import Conversation, Message
from tests.support.fake_provider import stream, text_chunks, usage_chunk
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_reply_of_one_token_each_way_says_token(page_for, users, project, fake_provider):
    make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("Hi."), usage_chunk(1, 1, reasoning=1)))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    page.get_by_label("Message").fill("One?")
    page.keyboard.press("Enter")

    reply = page.locator("rojo-chat-panel .bubble.assistant")
    expect(reply).to_have_attribute("data-usage", "1 token in · 1 out")
    expect(reply).to_have_attribute("title", "This reply: 1 model call, 1 reasoning token")
    expect(page.locator(".usage-total")).to_have_text("This conversation: 1 token in · 1 out")
    assert page.console_errors == []


def test_a_summary_of_one_message_says_it_in_the_singular(page_for, users, project):
    rojo = make_rojo("http://127.0.0.1:9/v1")
    conversation = Conversation.objects.create(project=project, rojo=rojo, user=users["editor"])
    rows = [
        ("user", "Read a.md"),
        ("summary", "- The user asked for a.md."),
        ("assistant", "a.md says hello."),
    ]
    for position, (role, content) in enumerate(rows):
        extra = {"until": 1, "summarised": 1, "from": 0} if role == "summary" else {}
        Message.objects.create(
            conversation=conversation, position=position, role=role, content=content, extra=extra
        )
    page = page_for(users["editor"])

    page.goto(f"/projects/{project.pk}/c/{conversation.pk}/")

    expect(page.locator(".summary-line summary")).to_have_attribute(
        "title", "1 earlier message is sent as this summary; it stays stored in full"
    )
    assert page.console_errors == []


def test_a_zip_of_one_file_unpacks_as_1_file(page_for, users, project):
    (project_root_create(project.pk) / "inbox").mkdir()
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        archive.writestr("only.txt", "the one file\n")
    page = page_for(users["editor"])
    page.add_init_script("window.confirm = () => true;")  # yes, unpack it
    page.goto(f"/projects/{project.pk}/")
    expect(page.locator('.file-tree li[data-path="inbox"]')).to_be_visible()

    page.evaluate(
        """bytes => {
            const data = new DataTransfer();
            data.items.add(new File([new Uint8Array(bytes)], "one.zip"));
            const target = document.querySelector('.file-tree li[data-path="inbox"]');
            target.dispatchEvent(new DragEvent("drop", { dataTransfer: data, bubbles: true }));
        }""",
        list(data.getvalue()),
    )

    expect(page.locator(".upload-list li .upload-status")).to_have_text("1 file unpacked")
    assert page.console_errors == []
