"""The file panel in Chromium: tree actions, drag-and-drop upload with progress, the editor
with Save and the merge view on a conflict, the history with restore, the live tree."""

import pytest
from playwright.sync_api import expect

from roject.storage import project_root_create
from tests.support.browser import screenshot
from tests.support.helpers import files_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Dialogs answered as a person would: confirm says yes, prompt gives the next queued answer.
ANSWERING = """
window.__answers = [];
window.confirm = () => true;
window.prompt = (question, value) => window.__answers.length ? window.__answers.shift() : value;
"""


@pytest.fixture
def root(project):
    return project_root_create(project.pk)


def open_project(page_for, user, project, answers=()):
    page = page_for(user)
    page.add_init_script(ANSWERING)
    page.goto(f"/projects/{project.pk}/")
    if answers:
        page.evaluate("answers => window.__answers.push(...answers)", list(answers))
    return page


def entry(page, path: str):
    return page.locator(f'.file-tree li[data-path="{path}"]')


def test_new_folder_new_file_rename_and_delete_from_the_tree(page_for, users, project, root):
    page = open_project(page_for, users["editor"], project, ["notes", "notes/a.md", "notes/b.md"])
    page.get_by_role("button", name="New folder").click()
    expect(entry(page, "notes")).to_be_visible()
    page.get_by_role("button", name="New file").click()
    expect(page.locator(".file-viewer .file-name")).to_have_text("notes/a.md")
    assert files_in(root) == {"notes/a.md": ""}
    entry(page, "notes").locator(".entry").click()
    entry(page, "notes/a.md").hover()
    entry(page, "notes/a.md").get_by_role("button", name="Rename or move").click()
    expect(entry(page, "notes/b.md")).to_be_visible()
    assert files_in(root) == {"notes/b.md": ""}
    entry(page, "notes/b.md").hover()
    entry(page, "notes/b.md").get_by_role("button", name="Delete").click()
    expect(entry(page, "notes/b.md")).to_have_count(0)
    assert files_in(root) == {}
    assert page.console_errors == []


def test_a_refresh_between_a_press_and_its_release_keeps_the_click(page_for, users, project, root):
    """A rojo's turn refreshes the tree with each batch of changes: one landing while a
    person's button is down must not replace the folder under the pointer, which loses the
    click (a click needs its press and release on one element)."""
    (root / "notes").mkdir()
    (root / "notes" / "a.md").write_text("A")
    (root / "y.md").write_text("Y")
    page = open_project(page_for, users["editor"], project)
    folder = entry(page, "notes").locator(":scope > .entry")
    expect(folder).to_be_visible()
    folder.hover()
    page.mouse.down()
    (root / "y.md").unlink()  # news for the refresh to show, below the folder: one entry
    (root / "z.md").write_text("Z")  # gone, one new
    with page.expect_response(lambda response: "/files?path=" in response.url):
        page.locator(".refresh-files").dispatch_event("click")
    expect(entry(page, "z.md")).to_be_visible()
    expect(entry(page, "y.md")).to_have_count(0)
    page.mouse.up()
    expect(entry(page, "notes/a.md")).to_be_visible()
    expect(folder).to_have_attribute("aria-expanded", "true")
    assert page.console_errors == []


def test_a_refresh_that_drops_an_entry_above_keeps_the_focus_where_it_was(
    page_for, users, project, root
):
    """The entries a refresh finds again stay where they are in the page, not taken out and
    put back (which drops the keyboard's focus), when one before them went."""
    for name in ("a.md", "b.md", "c.md"):
        (root / name).write_text(name)
    page = open_project(page_for, users["editor"], project)
    expect(entry(page, "c.md")).to_be_visible()
    entry(page, "c.md").locator(".entry").focus()
    (root / "a.md").unlink()
    with page.expect_response(lambda response: "/files?path=" in response.url):
        page.locator(".refresh-files").dispatch_event("click")
    expect(entry(page, "a.md")).to_have_count(0)
    expect(entry(page, "c.md").locator(".entry")).to_be_focused()
    assert page.evaluate("document.activeElement.closest('li').dataset.path") == "c.md"


def test_a_viewer_gets_downloads_but_no_editing(page_for, users, project, root):
    (root / "a.md").write_text("A")
    page = open_project(page_for, users["viewer"], project)
    expect(entry(page, "a.md")).to_be_visible()
    expect(page.get_by_role("button", name="New file")).to_have_count(0)
    expect(page.get_by_role("button", name="Upload files")).to_have_count(0)
    entry(page, "a.md").hover()
    expect(entry(page, "a.md").get_by_role("link", name="Download")).to_be_visible()
    entry(page, "a.md").locator(".entry").click()
    expect(page.locator(".file-viewer .edit-file")).to_be_hidden()


def test_files_dropped_on_a_folder_upload_with_progress(page_for, users, project, root):
    (root / "inbox").mkdir()
    page = open_project(page_for, users["editor"], project)
    expect(entry(page, "inbox")).to_be_visible()
    page.evaluate(
        """() => {
            const data = new DataTransfer();
            data.items.add(new File(["hello\\n"], "hello.txt", { type: "text/plain" }));
            data.items.add(new File([new Uint8Array(300000)], "zeros.bin"));
            const target = document.querySelector('.file-tree li[data-path="inbox"]');
            target.dispatchEvent(new DragEvent("drop", { dataTransfer: data, bubbles: true }));
        }"""
    )
    rows = page.locator(".upload-list li")
    expect(rows).to_have_count(2)
    expect(rows.locator(".upload-status")).to_have_text(["uploaded", "uploaded"])
    assert [row.evaluate("li => li.querySelector('progress').value") for row in rows.all()] == [
        1,
        1,
    ]
    assert (root / "inbox" / "hello.txt").read_text() == "hello\n"
    assert (root / "inbox" / "zeros.bin").stat().st_size == 300000
    screenshot(page, "files-upload")


def test_the_editor_saves_and_a_conflicting_save_shows_the_merge_view(
    page_for, users, project, root
):
    """Two people open one file; the owner saves first; the editor's Save then shows both
    versions side by side, and saving from there writes the merged text."""
    (root / "a.md").write_text("# Title\n")
    pages = [open_project(page_for, users[who], project) for who in ("owner", "editor")]
    for page in pages:
        entry(page, "a.md").locator(".entry").click()
        page.locator(".edit-file").click()
        expect(page.locator(".file-editor .cm-content")).to_be_visible()
    owner, editor = pages
    # Both type before either saves: an editor with unsaved work keeps it when the file
    # changes elsewhere (one with none would take the new text).
    for page, line in ((owner, "owner's line\n"), (editor, "editor's line\n")):
        page.locator(".file-editor .cm-content").click()
        page.keyboard.press("Control+End")
        page.keyboard.type(line)
    owner.locator(".save-file").click()
    expect(owner.locator(".file-editor-note")).to_have_text("Saved.")
    assert (root / "a.md").read_text() == "# Title\nowner's line\n"
    expect(editor.locator(".file-editor-note")).to_contain_text("was changed by owner")
    editor.locator(".save-file").click()
    expect(editor.locator(".file-editor .cm-mergeView")).to_be_visible()
    expect(editor.locator(".file-editor-note")).to_contain_text("changed since you opened it")
    assert (root / "a.md").read_text() == "# Title\nowner's line\n"
    expect(editor.get_by_role("dialog")).to_be_visible()
    panes = editor.locator(".cm-mergeView .cm-mergeViewEditor")
    expect(panes).to_have_count(2)
    width = editor.viewport_size["width"]
    for pane in panes.all():  # each side most of half the window, not the file panel's column
        assert pane.bounding_box()["width"] >= 0.4 * width, pane.bounding_box()
    screenshot(editor, "files-merge")
    editor.locator(".save-file").click()
    expect(editor.locator(".file-editor-note")).to_have_text("Saved.")
    assert (root / "a.md").read_text() == "# Title\neditor's line\n"
    # The browser logs the 409 it was answered; nothing else went wrong.
    assert [e for e in editor.console_errors if "409" not in e] == [] == owner.console_errors


def test_a_save_shows_the_files_new_size(page_for, users, project, root):
    """After Save the line under the file's name gives the size saved, not the one opened."""
    (root / "a.md").write_text("# Title\n")
    page = open_project(page_for, users["editor"], project)
    entry(page, "a.md").locator(".entry").click()
    expect(page.locator(".file-meta")).to_contain_text("8 B · modified")
    page.locator(".edit-file").click()
    page.locator(".file-editor .cm-content").click()
    page.keyboard.press("Control+End")
    page.keyboard.type("more\n")
    page.keyboard.press("Control+s")
    expect(page.locator(".file-editor-note")).to_have_text("Saved.")
    assert (root / "a.md").read_text() == "# Title\nmore\n"
    expect(page.locator(".file-meta")).to_contain_text("13 B · modified")


def test_history_lists_changes_and_restores_a_version(page_for, users, project, root, client_for):
    api = client_for(users["owner"])
    files = f"/api/projects/{project.pk}/files"
    api.post(f"{files}/new", json={"path": "a.md", "text": "one\n"})
    base = api.get(f"{files}/content", params={"path": "a.md"}).json()["version"]
    api.post(f"{files}/save", json={"path": "a.md", "text": "two\n", "base": base})
    page = open_project(page_for, users["editor"], project)
    entry(page, "a.md").locator(".entry").click()
    page.get_by_role("button", name="History").click()
    items = page.locator(".history-list > li")
    expect(items).to_have_count(2)
    expect(items.first.locator(".history-diff")).to_contain_text("+two")
    expect(items.first.get_by_role("button", name="Restore this version")).to_have_count(0)
    items.nth(1).get_by_role("button", name="Restore this version").click()
    expect(page.locator(".file-content")).to_have_text("one\n")
    expect(items).to_have_count(3)
    expect(items.first.locator(".history-origin")).to_contain_text("restore")
    assert (root / "a.md").read_text() == "one\n"
    # The version the save left ("two") is the restore's copy now.
    items.nth(1).get_by_role("button", name="Restore this version").click()
    expect(page.locator(".file-content")).to_have_text("two\n")
    screenshot(page, "files-history")


def test_the_file_panel_follows_the_dark_palette(page_for, users, project, root, client_for):
    """On a dark system the panel, the open file, an entry's actions, the history's diff and
    the live badge take theme.css's dark colours; the toggle's light choice repaints them, and
    its dark one the editor's gutters."""
    api = client_for(users["owner"])
    files = f"/api/projects/{project.pk}/files"
    api.post(f"{files}/new", json={"path": "a.md", "text": "one\n"})
    base = api.get(f"{files}/content", params={"path": "a.md"}).json()["version"]
    api.post(f"{files}/save", json={"path": "a.md", "text": "two\n", "base": base})
    page = page_for(users["editor"])
    page.emulate_media(color_scheme="dark")
    page.goto(f"/projects/{project.pk}/")
    entry(page, "a.md").locator(".entry").click()
    page.get_by_role("button", name="History").click()
    expect(page.locator(".history-diff").first).to_contain_text("+two")
    expect(page.locator(".live-status")).to_have_text("● live")
    entry(page, "a.md").hover()
    parts = {
        "panel": page.locator(".files"),
        "file": page.locator(".file-content"),
        "action": entry(page, "a.md").get_by_role("button", name="Delete"),
        "diff": page.locator(".history-diff").first,
    }

    def colours() -> dict:
        found = {
            name: part.evaluate("e => getComputedStyle(e).backgroundColor")
            for name, part in parts.items()
        }
        found["live"] = page.locator(".live-status").evaluate("e => getComputedStyle(e).color")
        return found

    def painted(surface: str, code: str, ok: str) -> dict:
        return {"panel": surface, "file": code, "action": surface, "diff": code, "live": ok}

    assert colours() == painted("rgb(30, 27, 25)", "rgb(39, 35, 32)", "rgb(129, 199, 132)")
    screenshot(page, "files-dark")
    page.get_by_role("button", name="Dark mode").click()
    entry(page, "a.md").hover()
    assert colours() == painted("rgb(255, 255, 255)", "rgb(245, 243, 240)", "rgb(46, 125, 50)")
    # Dark again, by the toggle: CodeMirror's light gutters are repainted too.
    page.get_by_role("button", name="Dark mode").click()
    page.get_by_role("button", name="Edit").click()
    gutters = page.locator(".file-editor .cm-gutters")
    expect(gutters).to_be_visible()
    assert gutters.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(39, 35, 32)"


def test_the_tree_and_open_file_follow_changes_made_elsewhere(
    page_for, users, project, root, client_for
):
    """A viewer's page shows a file an editor uploads and a save to the file it has open,
    without a reload."""
    (root / "a.md").write_text("before\n")
    page = open_project(page_for, users["viewer"], project)
    entry(page, "a.md").locator(".entry").click()
    expect(page.locator(".file-content")).to_have_text("before\n")
    expect(page.locator(".live-status")).to_have_text("● live")
    api = client_for(users["editor"])
    files = f"/api/projects/{project.pk}/files"
    api.post(
        f"{files}/upload",
        params={"path": "new.txt"},
        content=b"new",
        headers={"Content-Type": "application/octet-stream"},
    )
    expect(entry(page, "new.txt")).to_be_visible()
    base = api.get(f"{files}/content", params={"path": "a.md"}).json()["version"]
    api.post(f"{files}/save", json={"path": "a.md", "text": "after\n", "base": base})
    expect(page.locator(".file-content")).to_have_text("after\n")


def test_the_live_tree_across_two_server_processes(
    browser, server_process, users, project, root, client_for
):
    """PostgreSQL + Redis: a page served by a second process shows an upload made on the
    first, without a reload."""
    import os

    from django.conf import settings
    from django.db import connection
    from django.test import Client

    if not os.environ.get("REDIS_URL") or connection.vendor != "postgresql":
        pytest.skip("the cross-process live tree runs with REDIS_URL and PostgreSQL")
    other = server_process()
    context = browser.new_context(base_url=other.base_url)
    try:
        login = Client()
        login.force_login(users["viewer"])
        session = login.cookies[settings.SESSION_COOKIE_NAME].value
        cookie = {"name": settings.SESSION_COOKIE_NAME, "value": session, "url": other.base_url}
        context.add_cookies([cookie])
        page = context.new_page()
        page.goto(f"/projects/{project.pk}/")
        expect(page.locator(".file-tree")).to_contain_text("No files yet.")
        expect(page.locator(".live-status")).to_have_text("● live")
        client_for(users["editor"]).post(
            f"/api/projects/{project.pk}/files/upload",
            params={"path": "from-one.txt"},
            content=b"one",
            headers={"Content-Type": "application/octet-stream"},
        )
        expect(entry(page, "from-one.txt")).to_be_visible()
    finally:
        context.close()


def test_dragging_an_entry_onto_a_folder_moves_it(page_for, users, project, root):
    (root / "docs").mkdir()
    (root / "a.md").write_text("A")
    page = open_project(page_for, users["editor"], project)
    entry(page, "a.md").drag_to(entry(page, "docs").locator(".entry"))
    expect(entry(page, "a.md")).to_have_count(0)
    assert files_in(root) == {"docs/a.md": "A"}
    entry(page, "docs").locator(".entry").click()
    expect(entry(page, "docs/a.md")).to_be_visible()


def test_an_open_editor_takes_a_change_made_elsewhere_unless_it_has_unsaved_work(
    page_for, users, project, root, client_for
):
    (root / "a.md").write_text("one\n")
    page = open_project(page_for, users["editor"], project)
    entry(page, "a.md").locator(".entry").click()
    page.locator(".edit-file").click()
    editor = page.locator(".file-editor .cm-content")
    expect(editor).to_have_text("one")
    expect(page.locator(".live-status")).to_have_text("● live")
    api = client_for(users["owner"])
    files = f"/api/projects/{project.pk}/files"

    def owner_saves(text: str) -> None:
        base = api.get(f"{files}/content", params={"path": "a.md"}).json()["version"]
        api.post(f"{files}/save", json={"path": "a.md", "text": text, "base": base})

    owner_saves("two\n")
    expect(editor).to_have_text("two")
    expect(page.locator(".file-editor-note")).to_have_text(
        "Updated: a.md was changed by owner (person)."
    )
    editor.click()
    page.keyboard.press("Control+End")
    page.keyboard.type("mine")
    owner_saves("three\n")
    expect(page.locator(".file-editor-note")).to_contain_text("Save will show both versions")
    expect(editor).to_contain_text("mine")
    page.keyboard.press("Control+s")
    expect(page.locator(".file-editor .cm-mergeView")).to_be_visible()
    assert (root / "a.md").read_text() == "three\n"
    # Esc closes the merge dialog: one editor again, in the panel, still holding "mine";
    # Save then writes it over the version now.
    page.keyboard.press("Escape")
    expect(page.get_by_role("dialog")).to_be_hidden()
    expect(page.locator(".file-editor .cm-mergeView")).to_have_count(0)
    expect(page.locator(".files .file-editor .cm-content")).to_contain_text("mine")
    expect(page.locator(".file-editor-note")).to_contain_text("Your text is kept")
    page.locator(".save-file").click()
    expect(page.locator(".file-editor-note")).to_have_text("Saved.")
    assert (root / "a.md").read_text() == "two\nmine"


def test_a_deleted_file_comes_back_from_recently_deleted(page_for, users, project, root):
    """Its history cannot be opened from the tree once it is gone: Recently deleted lists it,
    and Restore puts it back in the tree with its content; a viewer sees it but no Restore."""
    (root / "notes").mkdir()
    (root / "notes" / "a.md").write_text("alpha\n")
    page = open_project(page_for, users["editor"], project)
    entry(page, "notes").locator(".entry").click()
    entry(page, "notes/a.md").hover()
    entry(page, "notes/a.md").get_by_role("button", name="Delete").click()
    expect(entry(page, "notes/a.md")).to_have_count(0)
    assert files_in(root) == {}

    page.get_by_text("Recently deleted", exact=True).click()
    deleted = page.get_by_role("list", name="Recently deleted").locator("li")
    expect(deleted).to_have_count(1)
    expect(deleted.locator(".deleted-path")).to_have_text("notes/a.md")
    expect(deleted.locator(".deleted-meta")).to_contain_text("editor")
    screenshot(page, "files-recently-deleted")

    viewer = open_project(page_for, users["viewer"], project)
    viewer.get_by_text("Recently deleted", exact=True).click()
    seen = viewer.get_by_role("list", name="Recently deleted").locator("li")
    expect(seen.locator(".deleted-path")).to_have_text("notes/a.md")
    expect(seen.get_by_role("button")).to_have_count(0)

    deleted.get_by_role("button", name="Restore notes/a.md").click()
    expect(entry(page, "notes/a.md")).to_be_visible()
    expect(page.get_by_role("list", name="Recently deleted")).to_have_text(
        "Nothing deleted lately."
    )
    assert files_in(root) == {"notes/a.md": "alpha\n"}
    entry(page, "notes/a.md").locator(".entry").click()
    expect(page.locator(".file-viewer .file-content")).to_have_text("alpha\n")
    assert page.console_errors == [] and viewer.console_errors == []
