"""The pages' messages (roject/server/message_storage.py): the storage's backends are made only
for a request that reads or adds a message, and a message still goes from one request to
the next, in its cookie or, too large for it, in the session."""

import pytest
from django.contrib import messages
from django.contrib.messages.storage import default_storage
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpResponse

pytestmark = pytest.mark.django_db


def _request(rf, cookies: dict | None = None, session_key: str | None = None):
    request = rf.get("/")
    request.COOKIES.update(cookies or {})
    if session_key:
        request.COOKIES["sessionid"] = session_key
    SessionMiddleware(lambda r: HttpResponse()).process_request(request)
    request._messages = default_storage(request)
    return request


def _answered(request) -> HttpResponse:
    response = HttpResponse()
    request._messages.update(response)
    request.session.save()
    return response


def test_a_request_without_messages_makes_no_backend_and_sets_no_cookie(rf):
    request = _request(rf)
    response = _answered(request)
    assert "storages" not in vars(request._messages)
    assert "messages" not in response.cookies


@pytest.mark.parametrize("size", [20, 5_000])  # the cookie's; over its 2 KB, the session's
def test_a_message_reaches_the_next_request_once(rf, size):
    first = _request(rf)
    messages.success(first, "x" * size)
    response = _answered(first)
    cookies = {name: morsel.value for name, morsel in response.cookies.items()}
    second = _request(rf, cookies, session_key=first.session.session_key)
    assert [m.message for m in messages.get_messages(second)] == ["x" * size]
    response = _answered(second)
    cookies = {name: morsel.value for name, morsel in response.cookies.items()}
    third = _request(rf, cookies, session_key=first.session.session_key)
    assert list(messages.get_messages(third)) == []
