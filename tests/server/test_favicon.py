"""Every page's icon is found on the live server: /favicon.ico, which a browser asks for on a
page that names no icon (the admin's, the API docs', an error page), and the icon the app's
own pages name. Each was a 404 in the server's log on every admin page."""

import re
from urllib.error import HTTPError
from urllib.parse import urljoin
from urllib.request import Request, urlopen

import pytest
from django.conf import settings
from django.test import Client

pytestmark = pytest.mark.django_db(transaction=True)

ICO = b"\x00\x00\x01\x00"  # an ICO file's first bytes
ICON_LINK = re.compile(r'<link rel="icon" href="([^"]+)"')


def get(url: str, cookie: str = "") -> tuple[int, str, bytes]:
    """GET `url`, redirects followed: the final status, content type and body."""
    try:
        with urlopen(Request(url, headers={"Cookie": cookie}), timeout=30) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def test_favicon_ico_is_the_apps_icon(asgi_server):
    status, kind, body = get(f"{asgi_server}/favicon.ico")

    assert (status, kind, body[:4]) == (200, "image/vnd.microsoft.icon", ICO)


@pytest.mark.parametrize(
    ("path", "logged_in"),
    [("/admin/", True), ("/admin/login/", False), ("/login/", False), ("/", True)],
)
def test_each_pages_icon_is_found(asgi_server, admin_user, path, logged_in):
    """The icon a page names, else the /favicon.ico a browser asks for, answers an image."""
    cookie = session_cookie(admin_user) if logged_in else ""
    status, _, page = get(f"{asgi_server}{path}", cookie)
    assert status == 200
    named = ICON_LINK.search(page.decode())
    icon = urljoin(f"{asgi_server}{path}", named.group(1) if named else "/favicon.ico")

    status, kind, body = get(icon, cookie)

    assert (status, body[:4]) == (200, ICO), (path, icon, kind)
