"""A streaming chat's request lets go of what it carries once its body is sent (Django's
handler holds it until the reply ends), and still closes as Django closes it."""

import io

from django.core.handlers.asgi import ASGIRequest

from rojos.web.event_streams import _request_released


def test_a_released_request_keeps_what_identifies_it_and_still_closes_its_body():
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/projects/1/chat",
        "query_string": b"",
        "headers": [(b"cookie", b"sessionid=abc"), (b"content-type", b"application/json")],
    }
    body = io.BytesIO(b'{"message": "Hi"}')
    request = ASGIRequest(scope, body)
    assert request.COOKIES == {"sessionid": "abc"} and request.body  # read, as a view reads them

    _request_released(request)

    assert not hasattr(request, "META") and not hasattr(request, "COOKIES")
    assert (request.method, request.path) == ("POST", "/api/projects/1/chat")
    request.close()  # what the response's close calls: no AttributeError swallowed there
    assert body.closed
