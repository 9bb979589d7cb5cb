"""The image as a team runs it: one container on a volume is a whole install that keeps its
data across restarts; containers starting together migrate once; it runs as no root."""

import json
import os

import httpx2
import pytest

from tests.fake_provider import stream, text_chunks, tool_call_chunks
from tests.helpers import PAGE
from tests.image_build import LIMITS, podman
from tests.live_server import parse_sse

pytestmark = pytest.mark.image


def volume_name(label: str) -> str:
    return f"rojo-test-{label}-{os.getpid()}"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_one_container_on_a_volume_is_a_whole_install_that_keeps_its_data(
    containers, fake_provider
):
    volume = volume_name("story")
    first = containers(volume)
    assert "one-time password" in first.logs()  # no fixed admin password, ever
    first.manage("create_project", "--name", "Docs", "--owner", "admin")
    first.manage("create_rojo", "--name", "Writer", "--base-url", fake_provider.base_url,
                 "--model", "fake-model")  # fmt: skip
    token = first.manage("create_api_token", "--user", "admin", "--name", "test")
    fake_provider.add(
        stream(*tool_call_chunks([("create_directory", {"path": "docs/intro"})])),
        stream(
            *tool_call_chunks(
                [("write_text_content", {"path": "docs/intro/index.page", "text": PAGE})]
            )
        ),
        stream(*text_chunks("I wrote docs/intro/index.page.")),
    )
    api = first.base_url + "/api"
    project = httpx2.get(api + "/projects", headers=bearer(token)).json()[0]
    rojo = httpx2.get(api + "/rojos", headers=bearer(token)).json()[0]
    with httpx2.stream(
        "POST", f"{api}/projects/{project['id']}/chat", headers=bearer(token), timeout=60,
        json={"message": "Write the intro page.", "rojo": rojo["id"]},
    ) as response:  # fmt: skip
        assert response.status_code == 200, response.read()
        events = list(parse_sse(response.iter_lines()))
    assert events[-1].type == "DONE", events[-1]
    first.stop()

    again = containers(volume)

    assert "one-time password" not in again.logs()  # the admin was made once
    api = again.base_url + "/api"
    page = httpx2.get(
        f"{api}/projects/{project['id']}/files/content",
        params={"path": "docs/intro/index.page"}, headers=bearer(token),
    )  # fmt: skip
    assert page.status_code == 200, page.text
    assert page.json()["text"] == PAGE
    listed = httpx2.get(f"{api}/projects/{project['id']}/conversations", headers=bearer(token))
    assert [c["title"] for c in listed.json()] == ["Write the intro page."]


def test_containers_starting_together_migrate_once_and_all_serve(containers):
    volume = volume_name("together")
    started = [
        containers(volume, wait=False, ROJO_ADMIN_USERNAME="root-admin",
                   ROJO_ADMIN_PASSWORD="a long password for the test")
        for _ in range(3)
    ]  # fmt: skip
    for container in started:
        container.wait_ready()

    logs = [container.logs() for container in started]
    assert sum("Applying roject.0001_initial" in log for log in logs) == 1, logs
    assert not any("one-time password" in log for log in logs)
    for container in started:
        assert httpx2.get(container.base_url + "/healthz").json() == {"status": "ok"}


def test_the_image_runs_as_no_root_and_says_what_it_is(image, containers):
    uid = podman("run", "--rm", *LIMITS, "--entrypoint", "id", image, "-u").stdout
    config = json.loads(podman("image", "inspect", image).stdout)[0]

    assert uid.strip() == "10001"
    labels = config["Config"]["Labels"]
    assert labels["org.opencontainers.image.version"] == "test"
    assert len(labels["org.opencontainers.image.revision"]) == 40
    assert "/healthz" in " ".join(config["Healthcheck"]["Test"])
    assert config["Config"]["Volumes"] == {"/data": {}}
