"""GET /metrics in Prometheus' text format, answered before Django like the probes.

Only for who may see it: a client address in ROJO_METRICS_ALLOWED (addresses or networks,
comma-separated; the address of the connection itself, as Prometheus scrapes each process
directly, never one a proxy forwards), or a request with `Authorization: Bearer
<ROJO_METRICS_TOKEN>`. Everyone else gets 404, as if there were nothing here.

The figures are the default registry's, this process's (one a container: `manage.py serve`);
each app defines its own (rojos/metrics.py), roject its upload bytes here.
"""

import hmac
import ipaddress

from asgiref.sync import sync_to_async
from django.conf import settings
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, generate_latest

PATH = "/metrics"

upload_bytes = Counter("rojo_upload_bytes", "Bytes of file uploads received.")


def _allowed_networks() -> list:
    networks = []
    for item in settings.ROJO_METRICS_ALLOWED:
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            continue  # the doctor names it
    return networks


def metrics_allowed(scope) -> bool:
    """Whether this connection may read the figures: its address, or the token."""
    token = settings.ROJO_METRICS_TOKEN
    if token:
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                given = value.decode("latin-1").removeprefix("Bearer ").strip()
                if hmac.compare_digest(given.encode(), token.encode()):
                    return True
    client = scope.get("client")
    if not client:
        return False
    try:
        address = ipaddress.ip_address(client[0])
    except ValueError:
        return False
    return any(address in network for network in _allowed_networks())


class Metrics:
    """ASGI middleware: GET /metrics for those allowed; 404 for anyone else."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH:
            await self.app(scope, receive, send)
            return
        if not metrics_allowed(scope) or scope["method"] not in ("GET", "HEAD"):
            status, body, kind = 404, b"Not Found", b"text/plain"
        else:
            status, kind = 200, CONTENT_TYPE_LATEST.encode()
            body = await sync_to_async(generate_latest, thread_sensitive=False)(REGISTRY)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", kind), (b"cache-control", b"no-store")],
            }
        )
        await send({"type": "http.response.body", "body": body})
