"""A small HTTP/1.1 client for the chat endpoint: POST, then every server-sent event, parsed.

Hand-written on asyncio streams so that hundreds of streams fit in one process beside the
server and the provider on two cores, and so that what it costs is easy to account for.
"""

import asyncio
import contextlib
import gc
import json
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Event:
    type: str
    data: dict
    arrived_ns: int


@dataclass
class Target:
    """Where the server listens and the logged-in browser's cookies."""

    host: str
    port: int
    session_key: str
    csrf_token: str
    extra_headers: dict[str, str] = field(default_factory=dict)

    def request(self, path: str, payload: dict) -> bytes:
        body = json.dumps(payload).encode()
        headers = {
            "Host": f"{self.host}:{self.port}",
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
            "Accept": "text/event-stream",
            "Cookie": f"sessionid={self.session_key}; csrftoken={self.csrf_token}",
            "X-CSRFToken": self.csrf_token,
            "Connection": "close",
            **self.extra_headers,
        }
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        return f"POST {path} HTTP/1.1\r\n{head}\r\n".encode() + body


class HttpStatusError(Exception):
    """The server answered something else than 200."""


async def _body_pieces(reader: asyncio.StreamReader, chunked: bool) -> AsyncIterator[bytes]:
    if not chunked:
        while piece := await reader.read(65536):
            yield piece
        return
    while True:
        line = await reader.readline()
        if not line:  # cut off between two chunks: not the body's end (a zero-size chunk)
            raise asyncio.IncompleteReadError(b"", None)
        size = int(line.split(b";", 1)[0], 16)
        if size == 0:
            await reader.readline()
            return
        yield (await reader.readexactly(size + 2))[:-2]


async def events(target: Target, path: str, payload: dict) -> AsyncIterator[Event]:
    """POST `payload` to `path` and yield each server-sent event as it arrives."""
    reader, writer = await asyncio.open_connection(target.host, target.port, limit=2**20)
    try:
        writer.write(target.request(path, payload))
        status = (await reader.readline()).split(b" ", 2)
        headers = {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            key, _, value = line.decode("latin-1").partition(":")
            headers[key.strip().lower()] = value.strip()
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        if status[1] != b"200":
            body = b"".join([piece async for piece in _body_pieces(reader, chunked)])
            raise HttpStatusError(f"{status[1].decode()} {body[:300]!r}")
        buffer = b""
        async for piece in _body_pieces(reader, chunked):
            buffer += piece
            *complete, buffer = buffer.split(b"\n\n")
            arrived = time.monotonic_ns()
            for raw in complete:
                event = _parse(raw, arrived)
                if event is not None:
                    yield event
    finally:
        writer.close()


def _parse(raw: bytes, arrived_ns: int) -> Event | None:
    kind, data = "", ""
    for line in raw.decode().split("\n"):
        key, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if key == "event":
            kind = value
        elif key == "data":
            data = value
    return Event(kind, json.loads(data), arrived_ns) if kind else None


@contextlib.contextmanager
def few_gc_pauses() -> Iterator[None]:
    """Keep this process's full collections short while it times chunks.

    With the app and the SDK loaded here too, a full collection takes tens of ms, which the
    client would otherwise report as the server's delay.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


async def chat(target: Target, project_id: int, rojo: str, message: str) -> list[Event]:
    """One chat turn over HTTP: every event of its stream, parsed."""
    payload = {"rojo": rojo, "message": message}
    return [event async for event in events(target, f"/api/projects/{project_id}/chat", payload)]
