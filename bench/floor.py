"""The floor: a bare aiohttp relay that forwards the provider's bytes unchanged to the client.

`python -m bench.floor <provider base URL>` serves on a free port of 127.0.0.1 and prints
it. Any POST is sent on to the provider's /chat/completions as it came, and the provider's
answer streamed back byte for byte: no parsing, no database, no session. What the app costs
beyond it is the price of what it does (history, tools, sessions, events). GET
/__bench__/usage answers the process's CPU time in ns, as bench/server.py's does. With
BENCH_FLOOR_LOOP=uvloop it runs on uvloop (not a dependency), the floor of uvloop's variants.
"""

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from . import client as http
from .server import CALLGRIND_PATH, USAGE_PATH, Server


def _app(provider_url: str):
    import aiohttp
    from aiohttp import web

    async def session_open(app):
        connector = aiohttp.TCPConnector(limit=0)
        app["session"] = aiohttp.ClientSession(connector=connector)
        yield
        await app["session"].close()

    async def usage(request):
        return web.json_response({"cpu_ns": time.process_time_ns(), "gc_pauses": []})

    async def relay(request):
        body = await request.read()
        headers = {"Content-Type": "application/json", "Authorization": "Bearer bench-key"}
        async with request.app["session"].post(
            f"{provider_url}/chat/completions", data=body, headers=headers
        ) as upstream:
            response = web.StreamResponse(
                status=upstream.status,
                headers={"Content-Type": upstream.headers.get("Content-Type", "text/plain")},
            )
            await response.prepare(request)
            async for piece in upstream.content.iter_any():
                await response.write(piece)
            await response.write_eof()
            return response

    app = web.Application()
    app.cleanup_ctx.append(session_open)

    async def callgrind(request):
        from . import callgrind

        return web.json_response(callgrind.control(request.query_string))

    app.router.add_get(USAGE_PATH, usage)
    app.router.add_get(CALLGRIND_PATH, callgrind)
    app.router.add_post("/{tail:.*}", relay)
    return app


def main() -> None:
    import socket

    from aiohttp import web

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    print(sock.getsockname()[1], flush=True)
    loop = None
    if os.environ.get("BENCH_FLOOR_LOOP") == "uvloop":  # the floor of the uvloop variants
        import uvloop

        loop = uvloop.new_event_loop()
    web.run_app(_app(sys.argv[1]), sock=sock, print=None, access_log=None, backlog=2048, loop=loop)


def floor_start(env: dict[str, str], provider_url: str, log, *, wrapper: list[str] = ()) -> Server:
    """Start `python -m bench.floor` beside the app, and wait until it answers (`wrapper`:
    as bench.server.server_start's)."""
    import subprocess
    import urllib.error

    with log.open("a") as log_file:
        process = subprocess.Popen(
            [*wrapper, sys.executable, "-m", "bench.floor", provider_url],
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
        )
    server = Server(process=process, host="127.0.0.1", port=int(process.stdout.readline()))
    deadline = time.monotonic() + (900 if wrapper else 30)
    while True:
        try:
            server.cpu_ns()
            return server
        except (OSError, urllib.error.URLError):
            if time.monotonic() > deadline or process.poll() is not None:
                server.stop()
                raise RuntimeError(f"the floor relay did not start; see {log}") from None
            time.sleep(0.05)


@dataclass(frozen=True, slots=True)
class Piece:
    """One provider chunk as the floor's client saw it arrive."""

    arrived_ns: int
    sent_ns: int | None  # the provider's stamp, in a paced chunk


def provider_body(model: str, step: int = 0) -> dict:
    """The provider request a turn makes at `step` (that many tool results so far)."""
    messages = [{"role": "user", "content": "Go."}]
    messages += [{"role": "tool", "tool_call_id": f"c{n}", "content": "ok"} for n in range(step)]
    return {"model": model, "stream": True, "messages": messages}


def _stamp(data: bytes) -> int | None:
    choices = json.loads(data).get("choices") or [{}]
    text = (choices[0].get("delta") or {}).get("content") or ""
    head = text.split(" ", 1)[0]
    return int(head) if head.isdigit() else None


async def floor_stream(server: Server, body: dict) -> AsyncIterator[Piece]:
    """POST `body` through the floor; yield every provider chunk as it arrives."""
    reader, writer = await asyncio.open_connection(server.host, server.port, limit=2**20)
    payload = json.dumps(body).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {server.host}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
        "Connection: close\r\n\r\n"
    )
    try:
        writer.write(head.encode() + payload)
        status = (await reader.readline()).split(b" ", 2)
        headers = {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            key, _, value = line.decode("latin-1").partition(":")
            headers[key.strip().lower()] = value.strip()
        if status[1] != b"200":
            raise http.HttpStatusError(status[1].decode())
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        buffer = b""
        async for piece in http._body_pieces(reader, chunked):
            buffer += piece
            *complete, buffer = buffer.split(b"\n\n")
            arrived = time.monotonic_ns()
            for raw in complete:
                data = raw.removeprefix(b"data: ")
                if data and data != b"[DONE]":
                    yield Piece(arrived, _stamp(data))
    finally:
        writer.close()


if __name__ == "__main__":
    main()
