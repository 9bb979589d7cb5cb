"""The chat header names the project's instruction files in force, each opening in the file
panel; a name with markup is shown as text."""

import pytest
from playwright.sync_api import expect

from roject.storage import project_root_create, write_project_file
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FOLDER = "<b>notes</b>"


def test_the_header_lists_the_files_in_force_and_opens_one(page_for, users, project, fake_provider):
    root = project_root_create(project.pk)
    write_project_file(root, "AGENTS.md", "Every page ends with a footer.")
    write_project_file(root, f"{FOLDER}/AGENTS.md", "Notes are short.")
    write_project_file(root, f"{FOLDER}/a.md", "alpha\n")
    make_rojo(fake_provider.base_url)
    fake_provider.add(
        stream(*tool_call_chunks([("get_text_content", {"path": f"{FOLDER}/a.md"})])),
        stream(*text_chunks("Read.")),
    )
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    page.get_by_label("Message").fill("Read the note")
    page.keyboard.press("Enter")
    expect(page.locator(".bubble.assistant")).to_have_text("Read.")

    header = page.locator(".instruction-files")
    expect(header).to_have_text(f"Instructions: AGENTS.md, {FOLDER}/AGENTS.md")
    expect(header.locator("b")).to_have_count(0)
    header.get_by_role("link", name=f"{FOLDER}/AGENTS.md").click()
    expect(page.locator(".file-viewer .file-name")).to_have_text(f"{FOLDER}/AGENTS.md")
    expect(page.locator(".file-content")).to_have_text("Notes are short.")

    page.reload()  # a stored conversation shows them too
    expect(page.locator(".instruction-files")).to_contain_text(f"{FOLDER}/AGENTS.md")
