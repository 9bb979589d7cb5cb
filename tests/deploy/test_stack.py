"""The README's production quick start, run whole: deploy/compose.yaml started by podman-compose
with an env file filled in as a team fills it, used over HTTPS through Caddy (a login, a turn
that writes a page with its reply streamed through the proxy, a static file Caddy serves), then
`down` and `up` again with nothing lost.

The third-party images are stand-ins built here (tests/support/standins/README.md), the app's
is the session's image; the whole stack runs in a network namespace of the test's own, with
the fake provider and the test's client in it (tests/support/network_namespace.py).
"""

import os
import re
import secrets
import threading
import urllib.parse
from dataclasses import dataclass

import httpx2
import pytest

from tests.support.compose_stack import Stack, stack_directory
from tests.support.fake_provider import FakeProvider, Gate, stream, text_chunks, tool_call_chunks
from tests.support.helpers import PAGE
from tests.support.image_build import ROOT, env_file
from tests.support.live_server import parse_sse, read_until
from tests.support.network_namespace import network_namespace, network_namespace_missing
from tests.support.standin_images import standin_images

pytestmark = pytest.mark.image

ORIGIN = "https://localhost"


@dataclass
class Running:
    stack: Stack
    provider: FakeProvider
    admin_password: str

    @property
    def provider_url(self) -> str:
        """The fake provider as the app containers reach it: on the namespace's side of the
        stack's network, which Podman names host.containers.internal in every container."""
        port = urllib.parse.urlsplit(self.provider.base_url).port
        return f"http://host.containers.internal:{port}/v1"


@pytest.fixture
def running(image, tmp_path):
    """The stack, up and ready, on a domain Caddy certifies itself (`localhost`); all of it
    (containers, volumes, network, pod) removed afterwards, whatever happened."""
    if missing := network_namespace_missing():
        if os.environ.get("ROJO_REQUIRE_IMAGE"):
            pytest.fail(f"ROJO_REQUIRE_IMAGE is set but the stack cannot run: {missing}")
        pytest.skip(f"the stack test runs in a network namespace: {missing}")
    admin_password = secrets.token_urlsafe(18)
    filled = env_file(
        tmp_path,
        ROJO_DOMAIN="localhost", ROJO_PUBLIC_URL=ORIGIN, ALLOWED_HOSTS="localhost",
        CSRF_TRUSTED_ORIGINS=ORIGIN, SECRET_KEY=secrets.token_urlsafe(50),
        # What would break a URL (rojo.env's value reaches the app as PGPASSWORD):
        POSTGRES_PASSWORD=secrets.token_urlsafe(18) + "@/:#%2F",
        ROJO_ADMIN_PASSWORD=admin_password,
        ROJO_SHUTDOWN_GRACE_SECONDS="5", ROJO_IMAGE=image, **standin_images(),
    )  # fmt: skip
    with network_namespace("rojo-stack") as namespace:
        with namespace.entered():
            provider = FakeProvider(host="0.0.0.0")
        directory = stack_directory(tmp_path / "checkout", filled)
        stack = Stack(directory, f"rojo-test-{os.getpid()}", namespace)
        try:
            stack.up()
            yield Running(stack, provider, admin_password)
            provider.check_consumed()
        finally:
            left = stack.remove()
            provider.close()
    assert not left, f"`down -v` left {left}"


def logged_in(client: httpx2.Client, password: str) -> httpx2.Client:
    """`client` logged in as the admin with the login form, as a browser does."""
    form = client.get("/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
    assert form.status_code == 200 and token, form.text[:2000]
    done = client.post(
        "/login/", data={"csrfmiddlewaretoken": token[1], "username": "admin",
                         "password": password}, headers={"Referer": f"{ORIGIN}/login/"},
    )  # fmt: skip
    assert done.status_code == 302, done.text[:2000]
    return api_headers(client)


def api_headers(client: httpx2.Client) -> httpx2.Client:
    client.headers.update({"X-CSRFToken": client.cookies["csrftoken"], "Referer": f"{ORIGIN}/"})
    return client


def test_the_quick_start_serves_over_https_and_keeps_its_data_across_down_and_up(running):
    stack, provider = running.stack, running.provider
    stack.manage("create_project", "--name", "Docs", "--owner", "admin")
    stack.manage("create_rojo", "--name", "Writer", "--base-url", running.provider_url,
                 "--model", "fake-model")  # fmt: skip
    opened = threading.Event()
    provider.add(
        stream(*tool_call_chunks([("create_directory", {"path": "docs/intro"})])),
        stream(
            *tool_call_chunks(
                [("write_text_content", {"path": "docs/intro/index.page", "text": PAGE})]
            )
        ),
        # The rest only once the first words came through the proxy: a reply Caddy buffered
        # would come whole or not at all.
        stream(text_chunks("I wrote ", finish=None), Gate(opened), text_chunks("the page.")),
    )
    static = sorted((ROOT / "static" / "rojo").glob("*.js"))[0]

    with stack.namespace.entered(), stack.client() as client:
        logged_in(client, running.admin_password)
        project = client.get("/api/projects").json()[0]
        rojo = client.get("/api/rojos").json()[0]
        with client.stream(
            "POST", f"/api/projects/{project['id']}/chat",
            json={"message": "Write the intro page.", "rojo": rojo["id"]},
        ) as response:  # fmt: skip
            assert response.status_code == 200, response.read()
            events = parse_sse(response.iter_lines())
            before = read_until(events, "CHAT")
            opened.set()
            after = list(events)
        served = client.get(f"/static/rojo/{static.name}")
        cookies = dict(client.cookies)

    types = [event.type for event in before + after]
    assert types.count("TOOL_RESULT") == 2 and types[-1] == "DONE", types
    assert all(event.data["ok"] for event in before if event.type == "TOOL_RESULT")
    assert "".join(e.data["text"] for e in before + after if e.type == "CHAT") == (
        "I wrote the page."
    )
    assert served.status_code == 200 and served.content == static.read_bytes()
    assert served.headers["cache-control"] == "public, max-age=3600"  # Caddy's, not the app's
    assert served.headers["server"] == "Caddy"

    stack.down()
    stack.up()

    # The session too was kept (in PostgreSQL; Redis starts empty).
    with stack.namespace.entered(), stack.client(cookies=cookies) as client:
        api_headers(client)
        listed = client.get(f"/api/projects/{project['id']}/conversations")
        assert listed.status_code == 200, listed.text[:2000]
        conversation = listed.json()[0]
        detail = client.get(f"/api/conversations/{conversation['id']}").json()
        page = client.get(
            f"/api/projects/{project['id']}/files/content",
            params={"path": "docs/intro/index.page"},
        )  # fmt: skip

    assert [c["title"] for c in listed.json()] == ["Write the intro page."]
    assert detail["messages"][-1]["content"] == "I wrote the page."
    assert page.status_code == 200, page.text
    assert page.json()["text"] == PAGE
