"""Previews' addresses, against the live ASGI server: a member gets one for a file; it serves
the file and the files beside it with no session (a sandboxed page's requests carry none),
each kind with its type and a policy of its own; it is refused, telling nothing, when forged,
expired, or no longer backed by the person's access; and it reaches nothing outside the
project's root."""

import os

import httpx2
import pytest
from django.conf import settings as django_settings
from django.core import signing

from roject.identity.tokens import api_token_create, api_token_revoke
from roject.members.services import member_remove
from roject.previews.capability import preview_capability, preview_capability_read
from roject.storage import project_root_create
from tests.support.pdfs import pdf_file

pytestmark = pytest.mark.django_db(transaction=True)

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201a3e1f1740000000049454e44ae426082"
)


@pytest.fixture
def root(project):
    root = project_root_create(project.pk)
    (root / "site").mkdir()
    (root / "site" / "index.html").write_text(
        '<h1>Hi</h1><img src="logo.png"><link rel="stylesheet" href="css/site.css">'
        "<script>document.title = 'ran'</script>"
    )
    (root / "site" / "logo.png").write_bytes(PNG)
    (root / "site" / "css").mkdir()
    (root / "site" / "css" / "site.css").write_text("h1 { color: teal }")
    (root / "site" / "report.pdf").write_bytes(pdf_file(["Page one"]))
    (root / "site" / "tool.exe").write_bytes(b"MZ\x00\x01")
    return root


def address(client, project, path: str) -> str:
    response = client.get(f"/api/projects/{project.pk}/files/preview", params={"path": path})
    assert response.status_code == 200, response.text
    return response.json()["url"]


def test_a_page_and_the_files_beside_it_are_served_under_the_sandbox(
    client_for, users, project, root
):
    viewer = client_for(users["viewer"])
    response = viewer.get(
        f"/api/projects/{project.pk}/files/preview", params={"path": "site/index.html"}
    )
    assert response.json()["size"] == (root / "site" / "index.html").stat().st_size
    url = response.json()["url"]
    assert url.startswith("/preview/") and url.endswith("/site/index.html")
    anonymous = client_for()  # what a sandboxed page's own requests are: no session
    page = anonymous.get(url)
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    policy = page.headers["content-security-policy"]
    assert policy.startswith("sandbox;") and "default-src 'none'" in policy
    assert "script-src" not in policy  # default-src 'none': no script at all
    assert page.headers["x-frame-options"] == "SAMEORIGIN"
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "<script>" in page.text  # served as written: the policy, not an edit, disarms it
    base = url.rsplit("/", 1)[0]
    logo = anonymous.get(f"{base}/logo.png")
    assert (logo.status_code, logo.headers["content-type"], logo.content) == (200, "image/png", PNG)
    css = anonymous.get(f"{base}/css/site.css")
    assert css.headers["content-type"] == "text/css; charset=utf-8"
    pdf = anonymous.get(f"{base}/report.pdf")
    assert pdf.headers["content-type"] == "application/pdf"
    assert not pdf.headers["content-security-policy"].startswith("sandbox")
    assert "default-src 'none'" in pdf.headers["content-security-policy"]
    other = anonymous.get(f"{base}/tool.exe")
    assert other.headers["content-type"] == "application/octet-stream"
    assert other.headers["content-security-policy"].startswith("sandbox;")


def test_an_outsider_gets_no_address_and_a_forged_or_altered_one_serves_nothing(
    client_for, users, project, root, settings
):
    outsider = client_for(users["outsider"])
    response = outsider.get(
        f"/api/projects/{project.pk}/files/preview", params={"path": "site/index.html"}
    )
    assert response.status_code == 404
    anonymous = client_for()
    # The outsider signs nothing: a capability for the project under their own id is refused.
    theirs = preview_capability(user=users["outsider"], project_id=project.pk, address="127.0.0.1")
    assert anonymous.get(f"/preview/{theirs}/site/index.html").status_code == 404
    forged = signing.dumps([users["owner"].pk, project.pk], salt="another.salt", compress=False)
    assert anonymous.get(f"/preview/{forged}/site/index.html").status_code == 404
    url = address(client_for(users["editor"]), project, "site/index.html")
    token = url.split("/")[2]
    altered = token[:-2] + ("AA" if token[-2:] != "AA" else "BB")
    assert anonymous.get(url.replace(token, altered)).status_code == 404
    settings.ROJO_PREVIEW_SECONDS = -1  # every address has expired
    response = anonymous.get(url)
    assert response.status_code == 404
    assert "index.html" not in response.text


def test_an_address_ends_with_the_persons_access(client_for, users, project, root):
    url = address(client_for(users["editor"]), project, "site/index.html")
    anonymous = client_for()
    assert anonymous.get(url).status_code == 200
    member_remove(by=users["owner"], project_id=project.pk, user_id=users["editor"].pk)
    assert anonymous.get(url).status_code == 404
    url = address(client_for(users["viewer"]), project, "site/index.html")
    users["viewer"].is_active = False
    users["viewer"].save()
    assert anonymous.get(url).status_code == 404


def test_an_address_ends_with_the_sign_in_it_was_asked_with(client_for, users, project, root):
    """An address is as good as the sign-in that asked for it: once the person's password
    changes (which ends their other sessions: a stolen cookie, say) or the API token it came
    with is revoked, it serves nothing more. Before, whoever held one read any file of the
    project for the rest of its ROJO_PREVIEW_SECONDS."""
    anonymous = client_for()
    editor = users["editor"]
    url = address(client_for(editor), project, "site/index.html")
    kept = address(client_for(users["viewer"]), project, "site/index.html")
    assert anonymous.get(url).status_code == 200
    editor.set_password("a new password, the old one leaked")
    editor.save()
    assert anonymous.get(url).status_code == 404
    assert anonymous.get(url.rsplit("/", 1)[0] + "/logo.png").status_code == 404
    assert anonymous.get(kept).status_code == 200  # someone else's password: theirs goes on
    made = api_token_create(user=editor, name="script")
    scripted = client_for()
    scripted.http.headers["Authorization"] = f"Bearer {made.secret}"
    url = address(scripted, project, "site/index.html")
    assert anonymous.get(url).status_code == 200
    api_token_revoke(user=editor, token_id=made.token.pk)
    assert anonymous.get(url).status_code == 404
    both = client_for(editor)  # a session cookie and a token: the token is what signs in
    again = api_token_create(user=editor, name="script, again")
    both.http.headers["Authorization"] = f"Bearer {again.secret}"
    grant = preview_capability_read(address(both, project, "site/index.html").split("/")[2])
    assert (grant.token_id, grant.session_key) == (again.token.pk, None)


def test_an_address_ends_with_a_logout_of_the_session_it_was_asked_in(
    client_for, users, project, root
):
    """A logout ends the addresses asked in its session, and no other session's. Before, an
    address went on serving its client address until it expired (ROJO_PREVIEW_SECONDS): a
    shared computer's next user, with the page's address from its history, read the
    project's files after the person had signed out. The session's key is sealed in the
    address, not shown: the address is signed, not secret, and the key is what the session
    cookie holds."""
    anonymous = client_for()
    editor = users["editor"]
    signed_in, elsewhere = client_for(editor), client_for(editor)
    url = address(signed_in, project, "site/index.html")
    kept = address(elsewhere, project, "site/index.html")
    session_key = signed_in.http.cookies[django_settings.SESSION_COOKIE_NAME]
    *_, sealed = signing.loads(url.split("/")[2], salt="rojo.preview")
    assert sealed and session_key not in sealed and session_key not in url
    grant = preview_capability_read(url.split("/")[2])
    assert grant.session_key == session_key and session_key not in repr(grant)
    assert anonymous.get(url).status_code == 200
    assert signed_in.post("/logout/", follow_redirects=False).status_code == 302
    assert anonymous.get(url).status_code == 404
    assert anonymous.get(url.rsplit("/", 1)[0] + "/logo.png").status_code == 404
    assert anonymous.get(kept).status_code == 200  # asked in another session, still signed in


def test_an_address_outlives_a_rotation_of_the_secret_key(
    client_for, users, project, root, settings
):
    """A new SECRET_KEY with the old one in SECRET_KEY_FALLBACKS keeps the person's sessions,
    and so their addresses: one made before goes on serving. Before, its marks, made with
    the old key alone, no longer matched, and a rotation ended every preview. Once the old
    key is dropped, it serves nothing."""
    url = address(client_for(users["editor"]), project, "site/index.html")
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "a new key for the rotation, long enough for Django's checks"
    anonymous = client_for()
    assert anonymous.get(url).status_code == 200
    assert anonymous.get(url.rsplit("/", 1)[0] + "/logo.png").status_code == 200
    settings.SECRET_KEY_FALLBACKS = []
    assert anonymous.get(url).status_code == 404


def test_an_address_asked_in_a_session_ends_once_a_rotation_renews_its_key(
    client_for, users, project, root, settings
):
    """After a rotation of SECRET_KEY, a session's next request gets it a new key (Django's
    get_user: its password hash matched a fallback key only), so the old key an address
    carries is no session any more: the address ends, and a new one serves."""
    editor = client_for(users["editor"])
    url = address(editor, project, "site/index.html")
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "a new key for the rotation, long enough for Django's checks"
    fresh = address(editor, project, "site/index.html")  # the request that renews the key
    anonymous = client_for()
    assert anonymous.get(url).status_code == 404
    assert anonymous.get(fresh).status_code == 200


def test_an_address_reaches_nothing_outside_the_root(client_for, users, project, root, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("not the project's")
    (root / "site" / "link").symlink_to(outside)
    os.link(outside, root / "site" / "hard.txt")
    url = address(client_for(users["editor"]), project, "site/index.html")
    base, anonymous = url.rsplit("/", 1)[0], client_for()
    for path in ("link", "hard.txt", "../../secret.txt", "%2e%2e/%2e%2e/secret.txt", "css", ""):
        response = anonymous.get(f"{base}/{path}")
        assert response.status_code == 404, path
        assert "not the project's" not in response.text
    response = client_for(users["editor"]).get(
        f"/api/projects/{project.pk}/files/preview", params={"path": "site/css"}
    )
    assert response.status_code == 400


def test_an_address_serves_only_the_client_address_that_asked_for_it(
    client_for, users, project, root, asgi_server
):
    """A page the rojo wrote can undo the preview's Referrer-Policy (`<meta name="referrer"
    content="unsafe-url">`) and so hand its own address to another site on a click. Before,
    that site then read any file of the project for the rest of ROJO_PREVIEW_SECONDS; an
    address now serves only the client address that asked for it."""
    url = address(client_for(users["editor"]), project, "site/index.html")
    assert client_for().get(url).status_code == 200  # from 127.0.0.1, as it was asked
    elsewhere = httpx2.Client(
        base_url=asgi_server, transport=httpx2.HTTPTransport(local_address="127.0.0.2")
    )
    with elsewhere:
        assert elsewhere.get(url).status_code == 404
        assert elsewhere.get(url.rsplit("/", 1)[0] + "/logo.png").status_code == 404
        asked_there = elsewhere.get(
            f"/api/projects/{project.pk}/files/preview",
            params={"path": "site/index.html"},
            cookies=client_for(users["editor"]).http.cookies,
        )
        assert asked_there.status_code == 200
        assert elsewhere.get(asked_there.json()["url"]).status_code == 200
    assert client_for().get(asked_there.json()["url"]).status_code == 404
