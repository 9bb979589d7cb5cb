"""The chat stream's response hands its body's bytes to the server as they are, unless a
middleware replaced the content: then Django's own iteration (make_bytes) comes back."""

from rojos.web.api import _EventStream


async def _parts(*parts):
    for part in parts:
        yield part


async def test_the_server_iterates_the_body_itself():
    body = _parts(b"event: CHAT\n", b"data: {}\n\n")
    response = _EventStream(body, content_type="text/event-stream")

    assert aiter(response) is body
    assert [part async for part in aiter(response)] == [b"event: CHAT\n", b"data: {}\n\n"]


async def test_content_a_middleware_replaced_is_made_bytes_as_django_does():
    response = _EventStream(_parts(b"unused"), content_type="text/event-stream")
    response.streaming_content = _parts("text, not bytes", b"bytes")

    assert [part async for part in aiter(response)] == [b"text, not bytes", b"bytes"]
