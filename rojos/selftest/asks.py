"""The self-test's requests: tiny prompts, one tool, one tiny image, as a turn would send them.

Each starts from what a turn sends (the rojo's own request options and temperature, the
model, `stream`, usage asked for in the stream) less the options the provider refused
earlier in the same test, so that one refusal does not fail every probe after it.
"""

import base64
import struct
import zlib

NOTE_TOOL = {
    "type": "function",
    "function": {
        "name": "note",
        "description": "Write down one word.",
        "parameters": {
            "type": "object",
            "properties": {"word": {"type": "string", "description": "The word to write down."}},
            "required": ["word"],
        },
    },
}
# Options the app itself may add to a turn's request, which a provider may refuse.
ADDED_OPTIONS = ("stream_options", "parallel_tool_calls", "reasoning_effort")


def base_request(rojo, model: str, messages: list[dict], *, refused: frozenset[str]) -> dict:
    """A streamed request for `model` as a turn would make it, without the refused options."""
    options = rojo.request_options if isinstance(rojo.request_options, dict) else {}
    request = dict(options)
    if rojo.temperature is not None:
        request["temperature"] = rojo.temperature
    # A rojo's reasoning effort, where it has one, as its turns send it (their options win).
    effort = getattr(rojo, "reasoning_effort", "")
    if effort and "reasoning_effort" not in refused and "reasoning" not in options:
        request.setdefault("reasoning_effort", effort)
    request.update(model=model, messages=messages, stream=True)
    if "stream_options" not in refused:
        request.setdefault("stream_options", {"include_usage": True})
    return request


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


def red_square_png(size: int = 8) -> bytes:
    """A small plain red PNG, made here: no file to ship, a few dozen bytes to send."""
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * size for _ in range(size))
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"".join(
        (
            b"\x89PNG\r\n\x1a\n",
            _png_chunk(b"IHDR", header),
            _png_chunk(b"IDAT", zlib.compress(rows)),
            _png_chunk(b"IEND", b""),
        )
    )


def image_message() -> list[dict]:
    """A user message with the red square, in the chat-completions image part."""
    url = "data:image/png;base64," + base64.b64encode(red_square_png()).decode()
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What colour is this image? Answer in one word."},
                {"type": "image_url", "image_url": {"url": url}},
            ],
        }
    ]
