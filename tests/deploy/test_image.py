"""The image as a team runs it: one container on a volume is a whole install that keeps its
data across restarts; containers starting together migrate once; it runs as no root."""

import concurrent.futures
import json
import os

import httpx2
import pytest
from django.db import connection

from rojos.models import Conversation, Message, TurnRecord
from tests.support.fake_provider import Stream, stream, text_chunks, tool_call_chunks
from tests.support.helpers import PAGE, assert_history_valid, make_rojo, stored_history
from tests.support.image_build import HOST_NETWORK, LIMITS, compose_app, podman
from tests.support.live_server import ApiClient, parse_sse, read_until, wait_until
from tests.support.server_process import database_url

pytestmark = [pytest.mark.image, pytest.mark.django_db(transaction=True)]


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


def test_a_command_given_to_the_image_runs_in_place_of_the_server(image):
    """docs/operations.md moves an install to PostgreSQL with `podman compose … run --rm app1
    python manage.py migrate` (then `restore`): the entrypoint gave those words to `serve` as
    its arguments, which refused them ("unrecognized arguments"). Options stay serve's."""
    volume = volume_name("command")
    run = ("run", "--rm", *LIMITS, *HOST_NETWORK, f"--volume={volume}:/data", image)
    try:
        migrated = podman(*run, "python", "manage.py", "migrate", check=False)
        listed = podman(*run, "python", "manage.py", "showmigrations", "roject", check=False)
        prepared = podman(*run, "--no-server", check=False)
    finally:
        podman("volume", "rm", "-f", volume, check=False)

    assert migrated.returncode == 0, migrated.stderr[-2000:]
    assert "Applying roject.0001_initial... OK" in migrated.stdout
    assert "one-time password" not in migrated.stdout  # migrate alone, not serve
    assert "[X] 0001_initial" in listed.stdout, listed.stdout + listed.stderr
    assert prepared.returncode == 0, prepared.stderr[-2000:]
    assert "one-time password" in prepared.stdout  # `--no-server` went to serve


def test_the_image_runs_as_no_root_and_says_what_it_is(image, containers):
    uid = podman("run", "--rm", *LIMITS, *HOST_NETWORK, "--entrypoint", "id", image, "-u").stdout
    config = json.loads(podman("image", "inspect", image).stdout)[0]

    assert uid.strip() == "10001"
    labels = config["Config"]["Labels"]
    assert labels["org.opencontainers.image.version"] == "test"
    assert len(labels["org.opencontainers.image.revision"]) == 40
    assert "/healthz" in " ".join(config["Healthcheck"]["Test"])
    assert config["Config"]["Volumes"] == {"/data": {}}


@pytest.fixture
def two_apps(containers, tmp_path, settings):
    """deploy/compose.yaml's app service twice, on the host's PostgreSQL and Redis (the
    test's database and Redis database) with one storage volume and one static volume."""
    if connection.vendor != "postgresql" or not settings.REDIS_URL:
        pytest.skip("the stack's app containers run on PostgreSQL and Redis")
    app = compose_app(tmp_path)
    env = {
        **app["environment"],
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "SECRET_KEY": settings.SECRET_KEY,
        "SECURE_PROXY_SSL_HEADER": "0",  # no proxy in front here
        "ROJO_SHUTDOWN_GRACE_SECONDS": "3",
        "ROJO_PROCESSES": "2",
        # 20 replies of one person at once (the default limits are 3 running, 20 a minute).
        "ROJO_USER_CONCURRENT_TURNS": "0",
        "ROJO_USER_MESSAGES_PER_MINUTE": "0",
    }
    mounts = dict(volume.split(":") for volume in app["volumes"])
    storage = volume_name("storage")
    static = volume_name("static")
    assert mounts == {"storage": "/data", "static": "/static"}
    return [containers(storage, mounts={static: "/static"}, **env) for _ in range(2)]


def reply_chunks(text: str, seconds: float) -> Stream:
    words = text.split(" ")
    return stream(*text_chunks(text, pieces=len(words)), delay=seconds / len(words))


@pytest.mark.backend
def test_a_reply_on_one_app_container_is_followed_and_stopped_through_the_other(
    two_apps, users, project, fake_provider
):
    one, two = two_apps
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(reply_chunks(" ".join(["word"] * 200), seconds=20))
    on_one = ApiClient(one.base_url, users["editor"])
    on_two = ApiClient(two.base_url, users["editor"])
    with on_one.chat_stream(project.pk, rojo=rojo.pk, message="Talk") as started:
        events = parse_sse(started.iter_lines())
        read_until(events, "CHAT")
        conversation = Conversation.objects.get().pk
        with on_two.http.stream("GET", f"/api/conversations/{conversation}/stream") as followed:
            follow = parse_sse(followed.iter_lines())
            read_until(follow, "CHAT")
            stopped = on_two.post(f"/api/conversations/{conversation}/stop")
            followed_rest = list(follow)
        rest = list(events)

    assert stopped.json() == {"stopping": True}
    for seen in (rest, followed_rest):
        assert [event.type for event in seen][-2:] == ["ERROR", "DONE"]
        assert seen[-2].data["code"] == "stopped"
    assert TurnRecord.objects.get().status == TurnRecord.Status.STOPPED
    assert_history_valid(stored_history(conversation))
    on_one.close()
    on_two.close()


@pytest.mark.backend
def test_a_rolling_restart_under_20_replies_loses_nothing(two_apps, users, project, fake_provider):
    one, two = two_apps
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.allow_leftovers()
    fake_provider.add(*(reply_chunks(f"Reply {n} " + "word " * 30, seconds=8) for n in range(20)))

    # Logged in here: the threads only talk HTTP (each would hold a database connection).
    clients = [ApiClient((one, two)[n % 2].base_url, users["editor"]) for n in range(20)]

    def chat(n: int) -> list:
        return clients[n].chat(project.pk, rojo=rojo.pk, message=f"Message {n}")

    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        replies = [pool.submit(chat, n) for n in range(20)]
        wait_until(lambda: TurnRecord.objects.count() == 20, timeout=60)
        one.restart()  # replies on it finish within 3 s or end as interrupted, told
        two.restart()
        ended = [reply.result(timeout=120) for reply in replies]
    for client in clients:
        client.close()

    for events in ended:
        assert [event.type for event in events][-1] == "DONE"
        if "ERROR" in [event.type for event in events]:
            assert events[-2].data["code"] == "interrupted"
    assert Message.objects.filter(role="user").count() == 20
    assert not Conversation.objects.running().exists()
    records = TurnRecord.objects.values_list("status", flat=True)
    assert set(records) <= {TurnRecord.Status.DONE, TurnRecord.Status.INTERRUPTED}
    assert TurnRecord.Status.INTERRUPTED in set(records)  # the grace was shorter than a reply
    for conversation in Conversation.objects.all():
        history = stored_history(conversation.pk)
        assert_history_valid(history)
        assert history[-1].role == "assistant" and history[-1].content.startswith("Reply ")
        assert not history[-1].draft


def test_readiness_follows_the_storage_turning_read_only_and_back(containers):
    app = containers(volume_name("readonly"))

    def ready() -> int:
        return httpx2.get(app.base_url + "/readyz", timeout=10).status_code

    podman("exec", "--user", "root", app.name, "chmod", "0555", "/data/storage")
    wait_until(lambda: ready() == 503, timeout=15)
    reasons = httpx2.get(app.base_url + "/readyz").json()["reasons"]
    podman("exec", "--user", "root", app.name, "chmod", "0750", "/data/storage")
    wait_until(lambda: ready() == 200, timeout=15)

    assert [reason.split(":")[0] for reason in reasons] == ["storage"]
