"""Django's middlewares with their hooks on the event loop (roject/server/loop_middleware.py),
through the real ASGI server: no trip to a database thread for a hook that does no I/O,
and every semantic of the stack as before (CSRF, sessions, login, messages, headers)."""

import contextlib
from collections.abc import Iterator
from http.cookies import SimpleCookie

import httpx2
import pytest
from django.conf import settings

from roject.identity.tokens import api_token_create
from roject.models import Role
from tests.support.live_server import ApiClient, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def _middleware_hooks(names: list[str]) -> list[str]:
    return [name for name in names if "Middleware." in name]


def test_an_api_request_runs_no_middleware_hook_on_a_database_thread(
    client_for, users, project, crossings
):
    """Security, session, common, CSRF, auth, messages, X-Frame: all on the loop."""
    client = client_for(users["owner"])
    response = client.get("/api/projects")
    assert response.status_code == 200
    assert [p["id"] for p in response.json()] == [project.pk]
    assert crossings, "the request's own database reads crossed"
    assert _middleware_hooks(crossings) == []


def test_security_headers_and_the_csrf_cookie_are_set_on_the_loop(asgi_server, crossings):
    """The login page: X-Frame-Options, CSP, nosniff, referrer policy, and the CSRF cookie
    its form needs; none of them a trip to a database thread."""
    response = httpx2.get(f"{asgi_server}/login/", timeout=30)
    assert response.status_code == 200
    assert response.headers["X-Frame-Options"] == "DENY"
    assert "default-src 'self'" in response.headers["Content-Security-Policy"]
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "same-origin"
    assert settings.CSRF_COOKIE_NAME in response.cookies
    assert _middleware_hooks(crossings) == []


class _Browser:
    """An HTTP client that keeps every cookie it is given, Secure ones too (production
    settings), as a browser on HTTPS would; one a response deletes is gone."""

    def __init__(self, base_url: str) -> None:
        self.http = httpx2.Client(base_url=base_url, timeout=30)
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, **kwargs) -> httpx2.Response:
        sent = "; ".join(f"{name}={value}" for name, value in self.cookies.items())
        response = self.http.request(method, path, headers={"Cookie": sent}, **kwargs)
        self.http.cookies.clear()
        for header in response.headers.get_list("set-cookie"):
            for name, morsel in SimpleCookie(header).items():
                if morsel.value and morsel["max-age"] != "0":
                    self.cookies[name] = morsel.value
                else:
                    self.cookies.pop(name, None)
        return response

    def get(self, path: str, **kwargs) -> httpx2.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs) -> httpx2.Response:
        return self.request("POST", path, **kwargs)


@contextlib.contextmanager
def _login_form(base_url: str) -> Iterator[tuple[_Browser, str]]:
    """A browser that has read the login page, and the CSRF token it was given."""
    browser = _Browser(base_url)
    try:
        page = browser.get("/login/")
        yield browser, page.cookies[settings.CSRF_COOKIE_NAME]
    finally:
        browser.http.close()


def test_login_saves_the_session_once_and_logout_ends_it(asgi_server, users, crossings):
    """A login modifies the session: saved on a database thread, its cookie set; the next
    page is the user's; a logout flushes it and deletes the cookie."""
    with _login_form(asgi_server) as (http, csrf):
        crossings.clear()
        form = {"username": "owner", "password": "pw-owner", "csrfmiddlewaretoken": csrf}
        response = http.post("/login/", data=form)
        assert response.status_code == 302, response.text[:300]
        assert settings.SESSION_COOKIE_NAME in http.cookies
        assert _middleware_hooks(crossings) == ["SessionMiddleware.process_response"]
        assert http.get("/api/projects").status_code == 200
        token = http.cookies[settings.CSRF_COOKIE_NAME]  # rotated at login
        response = http.post("/logout/", data={"csrfmiddlewaretoken": token})
        assert response.status_code == 302
        assert settings.SESSION_COOKIE_NAME not in http.cookies  # deleted
        assert http.get("/api/projects").status_code == 401


@pytest.mark.parametrize("multipart", [False, True])
def test_a_form_post_without_its_csrf_token_is_refused(asgi_server, users, crossings, multipart):
    """Form-encoded (checked on the loop) or multipart (its form parsed on a database
    thread), a POST without the token is refused and logs no one in."""
    with _login_form(asgi_server) as (http, _):
        crossings.clear()
        form = {"username": "owner", "password": "pw-owner"}
        files = {"attachment": ("a.txt", b"x")} if multipart else None
        response = http.post("/login/", data=form, files=files)
        assert response.status_code == 403
        assert settings.SESSION_COOKIE_NAME not in http.cookies
        expected = ["CsrfViewMiddleware.process_view"] if multipart else []
        assert _middleware_hooks(crossings) == expected


def test_a_session_api_post_without_the_csrf_header_is_refused(asgi_server, users, project):
    """The API's session auth checks CSRF as before; the same request with it passes."""
    client = ApiClient(asgi_server, users["owner"])
    try:
        headers = {"X-CSRFToken": ""}
        response = client.post(f"/api/projects/{project.pk}/chat", json={}, headers=headers)
        assert response.status_code == 403
        assert client.post(f"/api/projects/{project.pk}/chat", json={}).status_code == 422
    finally:
        client.close()


def test_a_message_is_kept_for_the_next_page_and_shown_once(asgi_server, users, project):
    """messages: added by a POST (stored in its cookie on the loop), shown by the next
    page, then gone."""
    with _login_form(asgi_server) as (http, csrf):
        form = {"username": "owner", "password": "pw-owner", "csrfmiddlewaretoken": csrf}
        assert http.post("/login/", data=form).status_code == 302
        csrf = http.cookies[settings.CSRF_COOKIE_NAME]
        add = {"who": "outsider", "role": Role.VIEWER, "csrfmiddlewaretoken": csrf}
        response = http.post(f"/projects/{project.pk}/members/add/", data=add)
        assert response.status_code == 302, response.text[:300]
        assert "messages" in http.cookies
        shown = "outsider is now a member"
        assert shown in http.get(f"/projects/{project.pk}/members/").text
        assert shown not in http.get(f"/projects/{project.pk}/members/").text


def _auth_calls(names: list[str]) -> list[str]:
    return [name for name in names if "Auth" in name or "Bearer" in name]


def test_an_async_endpoint_makes_one_trip_for_its_session_user(client_for, users, crossings):
    """No trip for the absent bearer token, the CSRF check on the loop, one for the user."""
    client = client_for(users["owner"])
    response = client.get("/api/changes/999999/diff")  # an async endpoint
    assert response.status_code == 404
    assert _auth_calls(crossings) == ["SessionAuth.authenticate"]
    assert _middleware_hooks(crossings) == []


def test_an_async_endpoint_makes_one_trip_for_its_bearer_token(asgi_server, users, crossings):
    """A bearer token: read in one trip; the session's auth is not tried."""
    made = api_token_create(user=users["owner"], name="script", expires_days=1)
    headers = {"Authorization": f"Bearer {made.secret}"}
    response = httpx2.get(f"{asgi_server}/api/changes/999999/diff", headers=headers, timeout=30)
    assert response.status_code == 404
    assert _auth_calls(crossings) == ["HttpBearer.__call__"]  # the token's read


def test_a_requests_start_is_no_trip_to_a_database_thread(asgi_server, crossings):
    """Django's request_started receivers are sync, so its handler used to cross to a
    database thread at every request's start to run them (rojo's handler takes them off:
    the database threads tidy their connections after each call). What is left of the
    login page is its sync view, its template's render and the response's close, where
    request_finished runs.

    The handler takes them off as it is made, once per process; Django's test Client puts
    close_old_connections back after each of its requests (an earlier test's), so this
    makes one first, as the server process did. The close runs after the body is sent, so
    the client may have the page before the server made that last trip: it is waited for."""
    from roject.server.db_threads import PooledThreadsASGIHandler

    PooledThreadsASGIHandler()
    response = httpx2.get(f"{asgi_server}/login/", timeout=30)
    assert response.status_code == 200
    wait_until(lambda: "HttpResponseBase.close" in crossings)
    assert crossings == [
        "View.as_view.<locals>.view",
        "SimpleTemplateResponse.render",
        "HttpResponseBase.close",
    ]
