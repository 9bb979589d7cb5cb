"""What reaches the page cannot pass for something else: characters that reorder or hide text
show as escapes (⟨U+202E⟩) wherever names are shown, and a reply's images are never loaded,
only linked, with the host in plain sight."""

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest
from django.test import Client
from playwright.sync_api import expect

from roject.storage import project_root_create
from roject.templatetags.visible import HIDDEN, visible
from rojos.models import Conversation
from tests.support.browser import screenshot
from tests.support.fake_provider import error_chunk, stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RLO = "\u202e"  # right-to-left override: "invoice\u202etxt.exe" reads "invoiceexe.txt"
SPOOF = f"invoice{RLO}txt.exe"
SHOWN = "invoice⟨U+202E⟩txt.exe"
SECRET = "sk-live-7f3a9c1e"


def open_project(page, project, conversation_id=None):
    suffix = f"c/{conversation_id}/" if conversation_id else ""
    page.goto(f"/projects/{project.pk}/{suffix}")


def send(page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_label("Message").press("Enter")


def shown_text(page) -> str:
    """All the text the page shows, as a person reads it (scripts and hidden parts left out)."""
    return page.locator("body").inner_text()


def test_hidden_characters_show_as_escapes_wherever_names_are_shown(
    page_for, users, project, fake_provider
):
    """A file, a tool call, the model's reply and a conversation title, each with a
    right-to-left override or another hidden character: the page shows the escapes in the
    activity lines, the approval's diff, the file tree, the viewer, the list, the labels."""
    project.name = f"Demo{RLO}Project"
    project.save()
    root = project_root_create(project.pk)
    (root / SPOOF).write_text("old\n")
    rojo = make_rojo(fake_provider.base_url, name="Test\u200brojo")
    Conversation.objects.create(
        project=project, rojo=rojo, user=users["owner"], title="Plan\u2066 the docs"
    )
    reply = f"Wrote `{SPOOF}`; it reads {SPOOF} now, a \ufeffbyte-order mark kept."
    fake_provider.add(
        stream(
            *tool_call_chunks(
                [
                    ("write_text_content", {"path": SPOOF, "text": f"new{RLO}text\n"}),
                    (f"read{RLO}file", {"path": SPOOF}),
                ]
            )
        ),
        stream(*text_chunks(reply, pieces=7)),
    )
    page = page_for(users["editor"])
    open_project(page, project)
    expect(page.locator("h1")).to_have_text("Demo⟨U+202E⟩Project")
    expect(page).to_have_title("Demo⟨U+202E⟩Project · Rojo Chat")
    expect(page.locator("#rojo-picker option")).to_have_text(["Test⟨U+200B⟩rojo · fake-model"])
    tree = page.locator(".file-tree")
    expect(tree.get_by_role("button")).to_have_text([SHOWN])

    send(page, f"Fix {SPOOF}")
    panel = page.locator("rojo-chat-panel")
    expect(panel.locator(".bubble.user")).to_have_text(f"Fix {SHOWN}")
    approval = panel.locator(".approval")
    preview = approval.locator(".preview")
    expect(preview).to_contain_text(f"--- a/{SHOWN}\n+++ b/{SHOWN}\n")
    expect(preview.locator(".removed")).to_have_text("-old\n")
    expect(preview.locator(".added")).to_have_text("+new⟨U+202E⟩text\n")
    expect(preview.locator(".hidden-char")).to_have_count(3)
    screenshot(page, "hidden-characters-approval")
    approval.get_by_role("button", name="Approve").click()

    lines = panel.locator(".tool-line")
    expect(lines.nth(0).locator(".call")).to_have_text(f'write_text_content("{SHOWN}", …)')
    expect(lines.nth(0).locator(".outcome")).to_have_text(" → ok")
    expect(lines.nth(1).locator(".call")).to_have_text(f'read⟨U+202E⟩file("{SHOWN}")')
    expect(lines.nth(1).locator(".outcome")).to_contain_text("error: unknown tool")
    undo_label = f'Undo write_text_content("{SHOWN}", …)'
    expect(panel.get_by_role("button", name=undo_label)).to_be_visible()
    lines.nth(0).locator("summary").click()
    expect(lines.nth(0).locator(".tool-args")).to_contain_text(f'"path": "{SHOWN}"')
    expect(lines.nth(0).locator(".tool-args")).to_contain_text('"text": "new⟨U+202E⟩text\\n"')

    bubble = panel.locator(".bubble.assistant")
    expect(bubble).to_have_text(
        f"Wrote {SHOWN}; it reads {SHOWN} now, a \ufeffbyte-order mark kept."
    )
    expect(bubble.locator("code")).to_have_text(SHOWN)
    expect(panel.locator(".busy")).to_be_hidden()

    listed = page.locator(".conversation-list a")
    expect(listed).to_have_text([f"Fix {SHOWN}", "Plan⟨U+2066⟩ the docs"])
    tree.get_by_role("button", name=SHOWN).click()
    viewer = page.locator(".file-viewer")
    expect(viewer.locator(".file-name")).to_have_text(SHOWN)
    expect(viewer.locator(".file-content")).to_have_text("new⟨U+202E⟩text\n")
    assert (root / SPOOF).read_text() == f"new{RLO}text\n"

    mark = tree.locator(".hidden-char")
    assert mark.get_attribute("title") == "U+202E, right-to-left override: shown, not applied"
    style = mark.evaluate("m => getComputedStyle(m).backgroundColor")
    assert style not in ("transparent", "rgba(0, 0, 0, 0)")  # it stands out
    screenshot(page, "hidden-characters")
    assert RLO not in shown_text(page) and "\u2066" not in shown_text(page)
    assert page.console_errors == []

    conversation = Conversation.objects.get(title=f"Fix {SPOOF}")
    open_project(page, project, conversation.pk)  # the stored turn, and the server's list
    expect(page.locator(".conversation-list li[aria-current] a")).to_have_text(f"Fix {SHOWN}")
    expect(panel.locator(".tool-line .call")).to_have_text(
        [f'write_text_content("{SHOWN}", …)', f'read⟨U+202E⟩file("{SHOWN}")']
    )
    expect(panel.locator(".bubble.user")).to_have_text(f"Fix {SHOWN}")
    expect(panel.get_by_role("button", name=undo_label)).to_be_visible()
    assert RLO not in shown_text(page)


def test_moves_deletes_and_errors_show_their_hidden_characters(
    page_for, users, project, fake_provider
):
    """The approval of a move and of a delete lists the paths with escapes, and an error the
    provider sends mid-stream shows its hidden characters too."""
    root = project_root_create(project.pk)
    (root / "notes").mkdir()
    (root / "notes" / SPOOF).write_text("old\n")
    (root / "a.txt").write_text("a\n")
    (root / SPOOF).write_text("b\n")
    make_rojo(fake_provider.base_url, tools=["move_path", "delete_path"])
    move = {"source": "a.txt", "destination": SPOOF, "overwrite": True}
    fake_provider.add(
        stream(*tool_call_chunks([("move_path", move)])),
        stream(*tool_call_chunks([("delete_path", {"path": "notes", "recursive": True})])),
        stream(
            *text_chunks("Half done", finish=None),
            error_chunk(f"quota for {SPOOF} exceeded"),
            done=False,
        ),
    )
    page = page_for(users["editor"])
    open_project(page, project)
    send(page, "Tidy up")

    panel = page.locator("rojo-chat-panel")
    approval = panel.locator(".approval")
    expect(approval.locator(".preview")).to_have_text(f"move a.txt → {SHOWN} (replaces it)")
    approval.get_by_role("button", name="Approve").click()
    expect(panel.locator(".tool-line").nth(0)).to_contain_text('move_path("a.txt", …) → ok')
    expect(approval.locator(".preview")).to_have_text(f"delete:\n  notes/{SHOWN}\n  notes")
    screenshot(page, "hidden-characters-delete")
    approval.get_by_role("button", name="Deny").click()
    error = panel.locator(".chat-error")
    expect(error).to_contain_text(f"quota for {SHOWN} exceeded")
    expect(error.locator(".hidden-char")).to_have_count(1)
    expect(panel.locator(".busy")).to_be_hidden()
    assert RLO not in shown_text(page)
    assert (root / SPOOF).read_text() == "a\n"
    assert (root / "notes" / SPOOF).read_text() == "old\n"
    assert page.console_errors == []


IMAGE_HOST = "evil.example.com"


@pytest.fixture
def image_host():
    """Another origin that a reply's images point at; it records every request it gets."""
    requests: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            requests.append(self.path)
            self.send_response(204)
            self.end_headers()

        def log_message(self, format, *args):
            """Say nothing."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield SimpleNamespace(url=f"http://127.0.0.1:{server.server_address[1]}", requests=requests)
    server.shutdown()
    server.server_close()
    thread.join()


def test_images_in_a_reply_are_never_loaded_and_links_show_their_host(
    page_for, users, project, fake_provider, image_host, asgi_server
):
    """An image, on this origin or another, is a link that names its host; no request is made
    for it. A link whose text is not its host shows the host beside it and the URL on hover."""
    make_rojo(fake_provider.base_url)
    own = f"{asgi_server}/static/rojo/app.css?key={SECRET}"
    other = f"{image_host.url}/pixel.png?key={SECRET}"
    far = f"https://{IMAGE_HOST}/p.png?key={SECRET}"
    docs = f"https://{IMAGE_HOST}/docs?token={SECRET}"
    reply = "\n\n".join(
        [
            f"![a chart]({far}) and ![]({other})",
            f"Also ![logo]({own}).",
            f"Read [the docs]({docs}), [example.com](https://example.com/)"
            " or [mail](mailto:a@b.example).",
            "Not these: ![x](data:image/png;base64,AAAA) [y](javascript:alert(1))",
        ]
    )
    fake_provider.add(stream(*text_chunks(reply, pieces=9)))
    page = page_for(users["editor"])
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    open_project(page, project)
    send(page, "Show me")

    bubble = page.locator("rojo-chat-panel .bubble.assistant")
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()
    other_host = image_host.url.removeprefix("http://")
    own_host = asgi_server.removeprefix("http://")
    paragraphs = bubble.locator("p")
    expect(paragraphs).to_have_text(
        [
            f"[image: a chart] ({IMAGE_HOST}) and [image] ({other_host})",
            f"Also [image: logo] ({own_host}).",
            f"Read the docs ({IMAGE_HOST}), example.com or mail (a@b.example).",
            "Not these: ![x](data:image/png;base64,AAAA) [y](javascript:alert(1))",
        ]
    )
    images = bubble.locator("a.image-link")
    expect(images).to_have_count(3)
    assert [images.nth(i).get_attribute("title") for i in range(3)] == [far, other, own]
    expect(bubble.get_by_role("link", name="the docs")).to_have_attribute("title", docs)
    expect(bubble.locator(".link-host")).to_have_text(
        [f"({IMAGE_HOST})", f"({other_host})", f"({own_host})", f"({IMAGE_HOST})", "(a@b.example)"]
    )
    expect(bubble.locator("img, picture, object, embed, iframe")).to_have_count(0)
    expect(bubble.locator("a")).to_have_count(6)
    screenshot(page, "image-links")

    page.wait_for_timeout(300)  # time for a request the page should not make
    assert [url for url in requested if SECRET in url] == []
    assert image_host.requests == []
    assert page.console_errors == []


def test_the_page_and_the_server_escape_the_same_characters(page_for, users, project):
    """static/rojo/visible.js and the template filter hold one set of hidden characters and
    mark each the same way, so a title reads the same before and after a reload."""
    page = page_for(users["editor"])
    open_project(page, project)
    in_js = page.evaluate(
        """async () => {
            const { visibleText } = await import("/static/rojo/visible.js");
            const hidden = [];
            for (let cp = 0; cp <= 0x10ffff; cp++) {
                if (cp >= 0xd800 && cp <= 0xdfff) continue;
                const char = String.fromCodePoint(cp);
                if (visibleText(char) !== char) hidden.push(cp);
            }
            return hidden;
        }"""
    )
    in_python = [
        cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF and HIDDEN.match(chr(cp))
    ]
    assert in_js == in_python
    assert {0x202E, 0x2066, 0x200B, 0x2028, 0xFEFF, 0x061C, 0x180E, 0x2060, 0x85, 0xE0041} <= set(
        in_js
    )
    assert not {0x09, 0x0A, 0x20, 0x41, 0xE9} & set(in_js)

    sample = "a<b>" + "x".join(chr(cp) for cp in in_python) + "&z"
    in_page = page.evaluate(
        """async (text) => {
            const { visible } = await import("/static/rojo/visible.js");
            const box = document.createElement("div");
            box.append(...visible(text));
            return box.innerHTML;
        }""",
        sample,
    )
    assert in_page == str(visible(sample))


def test_project_names_show_escapes_in_the_project_list(users, project):
    """The project list is rendered by the server: a name with a bidi override is escaped."""
    project.name = f"Demo{RLO}Project"
    project.save()
    client = Client()
    client.force_login(users["viewer"])
    html = client.get("/").content.decode()
    assert RLO not in html
    assert re.search(r'Demo<span class="hidden-char" title="[^"]+">⟨U\+202E⟩</span>Project', html)
