"""What must never happen in the browser: markup that runs, writes a viewer can ask for, leaks."""

import pytest
from playwright.sync_api import expect

from roject.storage import project_root
from rojos.models import Conversation, Message
from rojos.tools import registry
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

IMG = '<img src=x onerror="window.__pwned=1;alert(1)">'
SCRIPT = "<script>window.__pwned=1;alert(1)</script>"
JS_LINK = "[click](javascript:alert(1))"
# One payload per paragraph, and a few inside Markdown constructs, so each stays literal text.
HOSTILE_REPLY = "\n\n".join(
    [
        IMG,
        SCRIPT,
        JS_LINK,
        f"**{IMG}**",
        f"- `{SCRIPT}`",
        f"```html\n{SCRIPT}\n```",
    ]
)
FILE_NAME = "<img src=x onerror=alert(1)>.txt"
FILE_TEXT = f"{SCRIPT}\n{IMG}\n"


def open_project(page, project):
    return page.goto(f"/projects/{project.pk}/")


def send(page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.keyboard.press("Enter")


def assert_nothing_ran(page) -> None:
    assert page.dialogs == []
    assert page.evaluate("typeof window.__pwned") == "undefined"
    # An injected <img src=x> would also show up here, as a failed load or a CSP refusal.
    assert page.console_errors == []


def test_markup_in_model_text_shows_as_text(page_for, users, project, fake_provider):
    """Tags and javascript: links in the model's reply (and the question) stay literal text."""
    make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks(HOSTILE_REPLY, pieces=25), delay=0.01))
    page = page_for(users["editor"])
    open_project(page, project)

    send(page, f"Repeat this: {IMG}")
    reply = page.locator("rojo-chat-panel .bubble.assistant")
    expect(reply.locator("pre code")).to_have_text(SCRIPT)
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()
    for text in (IMG, SCRIPT, JS_LINK):
        expect(reply).to_contain_text(text)
    expect(reply.locator("strong")).to_have_text(IMG)
    expect(reply.locator("li code")).to_have_text(SCRIPT)
    expect(reply.locator("img, script, iframe, object, embed")).to_have_count(0)
    expect(reply.locator("a")).to_have_count(0)
    expect(page.locator("rojo-chat-panel .bubble.user")).to_have_text(f"Repeat this: {IMG}")
    listed = page.locator(".conversation-list li[aria-current] a")
    expect(listed).to_have_text(f"Repeat this: {IMG}")
    expect(page.locator(".conversation-list img")).to_have_count(0)
    expect(page.locator("a[href^='javascript:' i]")).to_have_count(0)
    assert_nothing_ran(page)


def test_markup_in_tool_arguments_shows_as_text(page_for, users, project, fake_provider):
    """A tool call whose path is markup is listed as text, in the chat and the file tree."""
    make_rojo(fake_provider.base_url)
    fake_provider.add(
        stream(*tool_call_chunks([("create_directory", {"path": IMG})])),
        stream(*text_chunks("Made it.")),
    )
    page = page_for(users["editor"])
    open_project(page, project)

    send(page, "Make a strange directory.")
    panel = page.locator("rojo-chat-panel")
    expect(panel.locator(".bubble.assistant")).to_have_text("Made it.")
    line = panel.locator(".tool-line")
    expect(line.locator(".call")).to_have_text(
        'create_directory("<img src=x onerror=\\"window.__pwned=1;alert(1)\\">")'
    )
    expect(line.locator(".outcome")).to_have_text(" → ok")
    line.locator("summary").click()
    expect(line.locator(".tool-args")).to_contain_text('onerror=\\"window.__pwned=1')
    expect(panel.locator("img, script")).to_have_count(0)

    tree = page.locator(".file-tree")
    expect(tree.get_by_role("button")).to_have_text([IMG])
    expect(tree.locator("img, script")).to_have_count(0)
    assert (project_root(project.pk) / IMG).is_dir()
    assert_nothing_ran(page)


def test_markup_in_file_names_and_content_shows_as_text(page_for, users, project):
    """A file whose name and text are markup is listed and opened as plain text."""
    root = project_root(project.pk)
    root.mkdir(parents=True, exist_ok=True)
    (root / FILE_NAME).write_text(FILE_TEXT)
    page = page_for(users["editor"])
    open_project(page, project)

    entry = page.locator(".file-tree").get_by_role("button", name=FILE_NAME)
    expect(entry).to_have_text(FILE_NAME)
    entry.click()
    viewer = page.locator(".file-viewer")
    expect(viewer.locator(".file-name")).to_have_text(FILE_NAME)
    expect(viewer.locator(".file-content")).to_have_text(FILE_TEXT)
    expect(page.locator("aside.files").locator("img, script")).to_have_count(0)
    assert_nothing_ran(page)


def test_markup_in_another_members_message_shows_as_text(page_for, users, project):
    """A conversation someone titled with markup is listed and reopened as text for others."""
    rojo = make_rojo("http://127.0.0.1:9/v1")
    conversation = Conversation.objects.create(
        project=project, rojo=rojo, user=users["editor"], title=IMG
    )
    Message.objects.create(conversation=conversation, position=0, role="user", content=IMG)
    page = page_for(users["viewer"])
    page.goto(f"/projects/{project.pk}/c/{conversation.pk}/")

    expect(page.locator(".conversation-list li[aria-current] a")).to_have_text(IMG)
    expect(page.locator("rojo-chat-panel .bubble.user")).to_have_text(IMG)
    expect(page.locator("main img, main script:not(#rojo-config)")).to_have_count(0)
    assert_nothing_ran(page)


def test_project_page_forbids_inline_script(page_for, users, project):
    """The page is served with a CSP that allows scripts from the app's own origin only."""
    page = page_for(users["editor"])
    response = open_project(page, project)
    assert response.status == 200
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy.split("script-src", 1)[1].split(";", 1)[0]


def test_viewer_reads_and_chats_without_write_tools(page_for, users, project, fake_provider):
    """A viewer is told the rojo can only read, sees only read tools, and can still chat."""
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("Here is what I can read.")))
    write_tools = sorted(tool.name for tool in registry if tool.writes)
    # The rojo's own read tools (read_result is no rojo's choice: a conversation holding a
    # kept result offers it).
    read_tools = sorted(
        tool.name for tool in registry if not tool.writes and tool.name in rojo.tools
    )
    assert write_tools and read_tools
    page = page_for(users["viewer"])
    open_project(page, project)

    expect(page.get_by_role("note")).to_contain_text("can only read")
    tools = page.locator(".rojo-tools")
    for name in read_tools:
        expect(tools).to_contain_text(name)
    for name in write_tools:
        expect(tools).not_to_contain_text(name)

    send(page, "What is in the project?")
    expect(page.locator("rojo-chat-panel .bubble.assistant")).to_have_text(
        "Here is what I can read."
    )
    expect(page.get_by_label("Message")).to_be_editable()
    offered = sorted(tool["function"]["name"] for tool in fake_provider.requests[0]["tools"])
    assert offered == read_tools
    assert page.console_errors == []


def test_editor_is_not_told_the_rojo_only_reads(page_for, users, project, fake_provider):
    """The read-only note is for viewers only; an editor sees the write tools too."""
    make_rojo(fake_provider.base_url)
    page = page_for(users["editor"])
    open_project(page, project)
    expect(page.locator(".rojo-tools")).to_contain_text("write_text_content")
    expect(page.get_by_role("note")).to_have_count(0)


def test_anonymous_visit_goes_to_the_login_page(page_for, project):
    """Without a session, the project page redirects to log in and then back."""
    page = page_for()
    page.goto(f"/projects/{project.pk}/")
    expect(page).to_have_url(f"/login/?next=/projects/{project.pk}/")
    expect(page.get_by_role("button", name="Log in")).to_be_visible()


def test_outsider_gets_not_found_for_the_project(page_for, users, project):
    """A user outside the project gets 404, exactly as for a project that does not exist."""
    page = page_for(users["outsider"])
    response = page.goto(f"/projects/{project.pk}/")
    assert response.status == 404
    assert "Demo Project" not in page.content()
    missing = page.goto(f"/projects/{project.pk + 1000}/")
    assert missing.status == 404


def test_viewer_reads_anothers_conversation_without_a_composer(
    page_for, users, project, fake_provider
):
    """In an editor's conversation a viewer sees the messages and whose it is, but no box to
    write in (the API refuses such a message too: tests/turns/test_viewer_steering.py)."""
    rojo = make_rojo(fake_provider.base_url)
    conversation = Conversation.objects.create(
        project=project, user=users["editor"], rojo=rojo, title="Editor's work"
    )
    Message.objects.create(conversation=conversation, position=0, role="user", content="Plan it")
    page = page_for(users["viewer"])
    page.goto(f"/projects/{project.pk}/c/{conversation.pk}/")
    expect(page.locator(".others-note")).to_contain_text("editor\u2019s conversation")
    expect(page.locator("rojo-chat-panel .bubble.user")).to_have_text("Plan it")
    expect(page.locator(".composer")).to_be_hidden()
    own = Conversation.objects.create(project=project, user=users["viewer"], rojo=rojo)
    page.goto(f"/projects/{project.pk}/c/{own.pk}/")
    expect(page.get_by_label("Message")).to_be_editable()
    expect(page.locator(".others-note")).to_have_count(0)
    assert page.console_errors == []
