"""A real ASGI server (uvicorn, in a thread) serving the app, and a client that speaks to it."""

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx2
import pytest
import uvicorn
from asgiref.sync import SyncToAsync
from django.conf import settings
from django.db import connections
from django.middleware.csrf import _get_new_csrf_string
from django.test import Client

from roject.server.db_threads import db_pool_close


class _ThreadedServer(uvicorn.Server):
    def install_signal_handlers(self) -> None:
        """Install none: the test runner owns the process's signals."""


@pytest.fixture(scope="session")
def asgi_server(django_db_setup, django_db_blocker) -> Iterator[str]:
    """The app served over HTTP on a random port for the whole session; yields its base URL."""
    from roject.asgi import application

    # The production command's parser (docs/operations.md, "Running at scale"), whose send the write
    # timeout (roject/server/write_timeout.py) reads.
    config = uvicorn.Config(
        application, host="127.0.0.1", port=0, log_level="warning", lifespan="off",
        loop="asyncio", http="httptools",
    )  # fmt: skip
    server = _ThreadedServer(config)
    thread = threading.Thread(target=server.run, daemon=True)
    with django_db_blocker.unblock():
        thread.start()
        deadline = time.monotonic() + 60
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the ASGI test server did not start")
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
        server.should_exit = True
        thread.join(timeout=10)
        # The app's ORM calls ran on the database threads (and some in asgiref's shared
        # thread); close their connections so the test database can be dropped.
        db_pool_close()
        SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=10)


@dataclass
class Event:
    type: str
    data: dict
    id: int | None = None


def parse_sse(lines) -> Iterator[Event]:
    """Server-sent events from an iterator of text lines."""
    fields: dict[str, str] = {}
    for line in lines:
        if line == "":
            if "event" in fields:
                seq = fields.get("id")
                yield Event(fields["event"], json.loads(fields["data"]), int(seq) if seq else None)
            fields = {}
            continue
        key, _, value = line.partition(":")
        fields[key] = value[1:] if value.startswith(" ") else value


class ApiClient:
    """An HTTP client logged in as one user, with a CSRF token, against the live server."""

    def __init__(self, base_url: str, user=None) -> None:
        csrf = _get_new_csrf_string()
        cookies = {settings.CSRF_COOKIE_NAME: csrf}
        if user is not None:
            django_client = Client()
            django_client.force_login(user)
            cookies[settings.SESSION_COOKIE_NAME] = django_client.cookies[
                settings.SESSION_COOKIE_NAME
            ].value
        self.http = httpx2.Client(
            base_url=base_url, cookies=cookies, headers={"X-CSRFToken": csrf}, timeout=30
        )

    def close(self) -> None:
        self.http.close()

    def get(self, path: str, **kwargs) -> httpx2.Response:
        return self.http.get(path, **kwargs)

    def post(self, path: str, **kwargs) -> httpx2.Response:
        return self.http.post(path, **kwargs)

    def chat_stream(self, project_id: int, **payload):
        """Open the chat stream; use as a context manager yielding the response."""
        return self.http.stream("POST", f"/api/projects/{project_id}/chat", json=payload)

    def chat(self, project_id: int, **payload) -> list[Event]:
        """Send a message and read the whole SSE stream."""
        with self.chat_stream(project_id, **payload) as response:
            assert response.status_code == 200, response.read()
            assert response.headers["content-type"].startswith("text/event-stream")
            return list(parse_sse(response.iter_lines()))


@pytest.fixture
def client_for(asgi_server):
    """Make ApiClients (logged in as a user, or anonymous) that are closed after the test."""
    clients = []

    def make(user=None, base_url: str = asgi_server) -> ApiClient:
        client = ApiClient(base_url, user)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def read_until(events: Iterator[Event], kind: str, count: int = 1) -> list[Event]:
    """Events up to and including the `count`-th of type `kind`."""
    seen: list[Event] = []
    while sum(event.type == kind for event in seen) < count:
        seen.append(next(events))
    return seen


def wait_until(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


__all__ = [
    "ApiClient",
    "Event",
    "asgi_server",
    "client_for",
    "parse_sse",
    "read_until",
    "wait_until",
]
