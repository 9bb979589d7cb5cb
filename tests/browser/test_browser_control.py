"""Staying in control, in the browser: approve or deny a change, undo it, export, errors kept."""

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from roject.storage import project_root_create
from rojos.models import Conversation, FileChange
from tests.support.browser import screenshot
from tests.support.fake_provider import http_error, stream, text_chunks, tool_call_chunks
from tests.support.helpers import PAGE, make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def open_chat(page, project, conversation_id=None):
    suffix = f"c/{conversation_id}/" if conversation_id else ""
    page.goto(f"/projects/{project.pk}/{suffix}")


def send(page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_label("Message").press("Enter")


def overwrite_replies():
    return (
        stream(*tool_call_chunks([("write_text_content", {"path": "notes.md", "text": "new\n"})])),
        stream(*text_chunks("Done.")),
    )


def test_approve_shows_the_diff_first_then_runs_the_write(page_for, users, project, fake_provider):
    root = project_root_create(project.pk)
    (root / "notes.md").write_text("old\n")
    make_rojo(fake_provider.base_url)
    fake_provider.add(*overwrite_replies())
    page = page_for(users["editor"])
    open_chat(page, project)
    send(page, "Replace notes.md")

    approval = page.locator(".approval")
    expect(approval).to_contain_text("write_text_content")
    expect(approval.locator(".preview .removed")).to_have_text("-old\n")
    expect(approval.locator(".preview .added")).to_have_text("+new\n")
    assert (root / "notes.md").read_text() == "old\n"
    screenshot(page, "approval-required")
    approval.get_by_role("button", name="Approve").click()

    line = page.locator(".tool-line")
    expect(line).to_contain_text('write_text_content("notes.md", …) → ok')
    expect(approval).to_have_count(0)
    expect(page.locator(".bubble.assistant")).to_have_text("Done.")
    assert (root / "notes.md").read_text() == "new\n"


def test_deny_leaves_the_file_and_tells_the_model(page_for, users, project, fake_provider):
    root = project_root_create(project.pk)
    (root / "notes.md").write_text("old\n")
    make_rojo(fake_provider.base_url)
    fake_provider.add(*overwrite_replies())
    page = page_for(users["editor"])
    open_chat(page, project)
    send(page, "Replace notes.md")

    page.locator(".approval").get_by_role("button", name="Deny").click()

    expect(page.locator(".tool-line.error")).to_contain_text("→ error: denied by the user")
    expect(page.locator(".bubble.assistant")).to_have_text("Done.")
    assert (root / "notes.md").read_text() == "old\n"
    told = fake_provider.requests[1]["messages"][-1]
    assert json.loads(told["content"]) == {"error": "denied by the user"}


def test_undo_a_call_and_a_whole_turn(page_for, users, project, fake_provider):
    root = project_root_create(project.pk)
    make_rojo(fake_provider.base_url, approval_tools=[])
    fake_provider.add(
        stream(*tool_call_chunks([("create_directory", {"path": "docs/intro"})])),
        stream(
            *tool_call_chunks(
                [("write_text_content", {"path": "docs/intro/index.page", "text": PAGE})]
            )
        ),
        stream(*text_chunks("Created it.")),
    )
    page = page_for(users["editor"])
    open_chat(page, project)
    send(page, "Make the intro page")
    expect(page.locator(".bubble.assistant")).to_have_text("Created it.")
    assert (root / "docs/intro/index.page").exists()

    page.locator("button.undo:not(.undo-turn)").nth(1).click()
    expect(page.locator(".tool-line").nth(1)).to_contain_text("(undone)")
    expect(page.locator(".tool-line").nth(0)).not_to_contain_text("(undone)")
    assert not (root / "docs/intro/index.page").exists()
    assert (root / "docs/intro").is_dir()

    page.get_by_role("button", name="Undo this turn").click()
    page.get_by_role("group", name="Undo this turn?").get_by_role(
        "button", name="Undo these changes"
    ).click()
    expect(page.locator(".tool-line").nth(0)).to_contain_text("(undone)")
    assert not (root / "docs").exists()
    assert all(change.undone for change in FileChange.objects.all())

    reopened = page_for(users["editor"])
    open_chat(reopened, project, Conversation.objects.get().pk)
    expect(reopened.locator(".tool-line.ok")).to_have_count(2)
    expect(reopened.locator(".tool-line.undone")).to_have_count(2)
    expect(reopened.locator("button.undo")).to_have_count(0)


def a_txt_written(page_for, users, project, fake_provider):
    """A page where the rojo has just written a.txt without asking; returns it and the root."""
    root = project_root_create(project.pk)
    make_rojo(fake_provider.base_url, approval_tools=[])
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "a.txt", "text": "rojo\n"})])),
        stream(*text_chunks("Written.")),
    )
    page = page_for(users["editor"])
    open_chat(page, project)
    send(page, "Write a.txt")
    expect(page.locator(".bubble.assistant")).to_have_text("Written.")
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()  # the turn's DONE came too
    return page, root


def test_undo_is_refused_when_the_file_changed_since(page_for, users, project, fake_provider):
    page, root = a_txt_written(page_for, users, project, fake_provider)
    (root / "a.txt").write_text("my newer work\n")

    page.locator(".tool-line + button.undo").click()

    expect(page.locator(".chat-error")).to_contain_text("changed since")
    assert (root / "a.txt").read_text() == "my newer work\n"
    expect(page.locator(".tool-line")).not_to_contain_text("(undone)")


def test_a_double_click_on_undo_undoes_once_without_a_false_warning(
    page_for, users, project, fake_provider
):
    """The second click must not say the file "changed since": nothing did."""
    page, root = a_txt_written(page_for, users, project, fake_provider)

    page.locator(".tool-line + button.undo").dblclick()

    expect(page.locator(".tool-line")).to_contain_text("(undone)")
    expect(page.get_by_role("button", name="Undo this turn")).to_have_count(0)  # nothing left
    page.wait_for_timeout(300)
    expect(page.locator(".chat-error")).to_have_count(0)
    assert not (root / "a.txt").exists()


def test_errors_are_shown_again_when_a_conversation_is_reopened(
    page_for, users, project, fake_provider, settings
):
    settings.ROJO_PROVIDER_RETRIES = 0
    make_rojo(fake_provider.base_url)
    fake_provider.add(http_error(500, {"error": {"message": "model overloaded"}}))
    page = page_for(users["editor"])
    open_chat(page, project)
    send(page, "Hello?")
    expect(page.locator(".chat-error")).to_contain_text("model overloaded")

    reopened = page_for(users["editor"])
    open_chat(reopened, project, Conversation.objects.get().pk)
    expect(reopened.locator(".bubble.user")).to_have_text("Hello?")
    expect(reopened.locator(".chat-error")).to_contain_text("model overloaded")


def test_export_links_download_the_conversation(page_for, users, project, fake_provider):
    make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("Hi **there**.")))
    page = page_for(users["viewer"])
    open_chat(page, project)
    expect(page.locator(".export-links")).to_be_hidden()
    send(page, "Say hi")
    expect(page.locator(".bubble.assistant")).to_contain_text("Hi there.")

    links = page.locator(".export-links")
    expect(links).to_be_visible()
    with page.expect_download() as download:
        links.get_by_role("link", name="Markdown").click()
    text = Path(download.value.path()).read_text()
    assert "## You\n\nSay hi" in text and "Hi **there**." in text
    with page.expect_download() as download:
        links.get_by_role("link", name="JSON").click()
    exported = json.loads(Path(download.value.path()).read_text())
    assert [m["role"] for m in exported["messages"]] == ["user", "assistant"]


def test_a_per_user_limit_reads_clearly_in_the_chat(
    page_for, users, project, fake_provider, settings
):
    settings.ROJO_USER_MESSAGES_PER_MINUTE = 1
    make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("First answer.")))
    page = page_for(users["editor"])
    open_chat(page, project)
    send(page, "One")
    expect(page.locator(".bubble.assistant")).to_have_text("First answer.")
    # The text shows before the turn's end: Enter while it runs sends nothing.
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()

    send(page, "Two")

    expect(page.locator(".chat-error")).to_contain_text("1 message in the last minute")
    expect(page.get_by_label("Message")).to_be_editable()
    expect(page.get_by_label("Message")).to_have_value("Two")  # not sent: back in the box
    expect(page.locator(".bubble.user")).to_have_text(["One"])
    assert len(fake_provider.requests) == 1


def test_a_message_over_the_size_limit_is_refused_and_kept_in_the_box(
    page_for, users, project, fake_provider
):
    make_rojo(fake_provider.base_url)
    page = page_for(users["editor"])
    open_chat(page, project)
    too_long = "x" * 100_001

    send(page, too_long)

    expect(page.locator(".chat-error")).to_have_text(
        "message: String should have at most 100000 characters"
    )
    expect(page.locator(".bubble.user")).to_have_count(0)
    assert page.get_by_label("Message").input_value() == too_long
    assert Conversation.objects.count() == 0
    assert fake_provider.requests == []


def test_a_refused_message_comes_back_before_what_was_typed_since(
    page_for, users, project, fake_provider
):
    """The box stays writable while a message is on its way: when the server refuses it, its
    text comes back into the box ahead of what was typed meanwhile (it was dropped)."""
    make_rojo(fake_provider.base_url)
    page = page_for(users["editor"])
    held = []
    page.route(re.compile(r"/api/projects/\d+/chat$"), lambda route: held.append(route))
    open_chat(page, project)
    send(page, "First thought")
    page.wait_for_function("() => document.querySelector('.bubble.user')")
    page.get_by_label("Message").fill("Second thought")
    held[0].fulfill(status=400, json={"detail": "Refused for the test."})

    expect(page.locator(".chat-error")).to_have_text("Refused for the test.")
    expect(page.locator(".bubble.user")).to_have_count(0)
    expect(page.get_by_label("Message")).to_have_value("First thought\n\nSecond thought")
