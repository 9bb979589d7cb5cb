"""Real HTTP peers on an address of the test's choosing (any of 127.0.0.0/8 is this host's):
each answers from a table of routes and records every request that reached it.

`metadata_server` makes one an MCP server asking for OAuth whose metadata names what the test
says: its authorization server, and that server's token and registration endpoints. A peer
on 127.0.0.2 stands for a host on an internal network: a service an MCP server's metadata
must not make Rojo reach.
"""

import http.client
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: str


@dataclass
class Peer:
    """A listener: `routes` maps (method, path) to (status, headers, JSON body)."""

    base_url: str
    routes: dict[tuple[str, str], tuple[int, dict, object]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)

    def answer(self, method: str, path: str, status: int, body: object, **headers) -> None:
        self.routes[(method, path)] = (status, headers, body)


class _Handler(BaseHTTPRequestHandler):
    peer: Peer

    def _any(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("latin-1")
        path = self.path.partition("?")[0]
        self.peer.seen.append(Seen(self.command, path, dict(self.headers), body))
        status, headers, payload = self.peer.routes.get((self.command, path), (404, {}, {}))
        data = json.dumps(payload).encode()
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(name.replace("_", "-"), value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = _any

    def log_message(self, format, *args) -> None:  # quiet
        return


@contextmanager
def _serving(base: type[BaseHTTPRequestHandler], host: str) -> Iterator[Peer]:
    """A server of `base`'s requests on `host`, a free port, for the block; its Peer."""
    handler = type(base.__name__.lstrip("_"), (base,), {})
    server = ThreadingHTTPServer((host, 0), handler)
    handler.peer = Peer(base_url=f"http://{host}:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield handler.peer
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def http_peer(host: str):
    """A peer listening on `host`, a free port, for the block."""
    return _serving(_Handler, host)


def metadata_server(
    peer: Peer,
    *,
    authorization_server: str | None = None,
    token_endpoint: str | None = None,
    registration_endpoint: str | None = None,
) -> str:
    """Make `peer` an MCP server at <peer>/mcp that answers 401 with a challenge naming its
    protected resource metadata, which names `authorization_server` (the peer itself when
    None); when that is the peer, it serves the authorization server's metadata too, with
    the endpoints given (else its own). The server's URL."""
    base = peer.base_url
    issuer = authorization_server or base
    metadata_url = f"{base}/.well-known/oauth-protected-resource/mcp"
    challenge = f'Bearer resource_metadata="{metadata_url}"'
    peer.answer("POST", "/mcp", 401, {}, WWW_Authenticate=challenge)
    peer.answer(
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        200,
        {"resource": f"{base}/mcp", "authorization_servers": [issuer]},
    )
    peer.answer(
        "GET",
        "/.well-known/oauth-authorization-server",
        200,
        {
            "issuer": base,
            "authorization_endpoint": f"{base}/authorize",
            "token_endpoint": token_endpoint or f"{base}/token",
            "registration_endpoint": registration_endpoint or f"{base}/register",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
        },
    )
    return f"{base}/mcp"


class _ProxyHandler(BaseHTTPRequestHandler):
    """A forward proxy for http:// URLs (absolute-form requests): records each, passes it on
    and answers what the origin answered (read whole: the peers here answer small bodies)."""

    peer: Peer

    def _any(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self.peer.seen.append(Seen(self.command, self.path, dict(self.headers), body.decode()))
        target = urlsplit(self.path)
        headers = {k: v for k, v in self.headers.items() if not k.lower().startswith("proxy-")}
        origin = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
        try:
            path = target.path + (f"?{target.query}" if target.query else "")
            origin.request(self.command, path, body=body or None, headers=headers)
            answer = origin.getresponse()
            data = answer.read()
        finally:
            origin.close()
        self.send_response(answer.status)
        for name, value in answer.getheaders():
            if name.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = _any

    def log_message(self, format, *args) -> None:  # quiet
        return


def http_proxy(host: str = "127.0.0.1"):
    """A recording forward proxy on `host`, for the block: `seen` holds the absolute URLs
    asked of it."""
    return _serving(_ProxyHandler, host)
