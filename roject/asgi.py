"""ASGI entry point: Django's HTTP app (with its static files) under Channels' protocol router."""

import gc
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "roject.settings")
django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does

from channels.routing import ProtocolTypeRouter  # noqa: E402  (needs Django set up first)

from roject.db_threads import OwnThreadASGIHandler  # noqa: E402
from roject.static_files import StaticFilesHandler  # noqa: E402
from roject.write_timeout import WriteTimeout  # noqa: E402

django_asgi_app = OwnThreadASGIHandler()

# The app serves its own few static files, so one process is all a newcomer needs; a
# deployment behind a reverse proxy can serve STATIC_ROOT there instead (roject/static_files.py
# answers 404 to any path that is not plainly inside the static directories).
# Each response's writes wait at most ROJO_CLIENT_WRITE_TIMEOUT for a client that reads.
application = ProtocolTypeRouter({"http": WriteTimeout(StaticFilesHandler(django_asgi_app))})

# Everything loaded so far lives as long as the process: keep it out of the garbage
# collector's passes. And collect less often than Python's default (every 700 net new
# objects, older generations every 10 younger passes): streaming hundreds of replies
# allocates fast, and with the defaults a 5-second run at 200 streams made ~380 passes,
# three of them full ones that stopped every stream for 50-120 ms (docs/performance.md).
gc.freeze()
gc.set_threshold(20_000, 20, 20)
