"""ASGI entry point: Django's HTTP app (with its static files) under Channels' protocol router,
and the MCP endpoint (/mcp/projects/<project>), an ASGI app of the MCP SDK's, beside it."""

import gc
import os
from importlib import import_module

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "roject.settings")
django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does

from channels.routing import ProtocolTypeRouter  # noqa: E402  (needs Django set up first)
from django.conf import settings  # noqa: E402
from django.utils.module_loading import import_string  # noqa: E402

from roject.server.db_threads import PooledThreadsASGIHandler  # noqa: E402
from roject.server.log_format import RequestIds  # noqa: E402
from roject.server.metrics import Metrics  # noqa: E402
from roject.server.probes import Probes  # noqa: E402
from roject.server.static_files import StaticFilesHandler  # noqa: E402
from roject.server.upload_gate import UploadGate  # noqa: E402
from roject.server.upload_guard import UploadSizeGuard  # noqa: E402
from roject.server.write_timeout import WriteTimeout  # noqa: E402

# The provider's and the MCP SDKs, which management commands leave out (over a second each),
# imported now rather than inside the first chat, sign-in or self-test, on the event loop.
import_module("rojos.eager")

django_asgi_app = PooledThreadsASGIHandler()
# By dotted string, as the root URLs include rojos': roject imports nothing from rojos.
mcp_app = import_string("rojos.mcp_endpoint.app.application")
chat_admission = import_string("rojos.web.chat_admission.ChatAdmission")
MCP_PREFIX = "/mcp/"


class PathRouter:
    """/mcp/… to the MCP endpoint; everything else to Django, as before."""

    def __init__(self, django_app, mcp_app) -> None:
        self.django_app = django_app
        self.mcp_app = mcp_app

    async def __call__(self, scope, receive, send):
        if scope["path"].startswith(MCP_PREFIX):
            return await self.mcp_app(scope, receive, send)
        return await self.django_app(scope, receive, send)


# The app serves its own few static files, so one process is all a newcomer needs; a deployment
# behind a reverse proxy can serve STATIC_ROOT there instead (roject/server/static_files.py answers
# 404 to any path that is not plainly inside the static directories). Each response's writes wait at
# most ROJO_CLIENT_WRITE_TIMEOUT for a client that reads;
# bodies over their limit, or that stall, are cut before Django has read them whole
# (roject/server/upload_guard.py), and who may upload is decided from the headers before any of an
# upload's body is read (roject/server/upload_gate.py). A chat takes its place among the
# starts under way before Django's request path (rojos/web/chat_admission.py).
django_app = UploadSizeGuard(
    UploadGate(StaticFilesHandler(chat_admission(django_asgi_app)), django_asgi_app)
)
# An orchestrator's probes (/healthz, /readyz) and Prometheus' /metrics are answered first:
# no Host check, no session.
application = ProtocolTypeRouter(
    {"http": Probes(Metrics(RequestIds(WriteTimeout(PathRouter(django_app, mcp_app)))))}
)

# What a server process does once at start-up, named by dotted string (roject imports
# nothing from the apps on it): rojos ends the turns its earlier life left running.
for hook in settings.ROJO_STARTUP_HOOKS:
    import_string(hook)()

# Everything loaded so far lives as long as the process: keep it out of the garbage
# collector's passes. And collect less often than Python's default (every 700 net new
# objects, older generations every 10 younger passes): streaming hundreds of replies
# allocates fast, and with the defaults a 5-second run at 200 streams made ~380 passes,
# three of them full ones that stopped every stream for 50-120 ms (docs/performance.md).
gc.freeze()
gc.set_threshold(20_000, 20, 20)
