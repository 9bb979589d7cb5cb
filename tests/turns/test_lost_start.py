"""A server killed (SIGKILL) after a chat's message was stored and before START: the client
got no status and no conversation id. It finds the conversation by the key it sent
(`GET .../conversations?key=`), listed with its failed badge, and reads the turn as
interrupted with the message kept; the page that sent it opens it on reload.
"""

import contextlib
import threading

import httpx2
import pytest

from rojos.models import Message
from rojos.turns.runner import INTERRUPTED_MESSAGE
from tests.support.fake_provider import stream, text_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import wait_until
from tests.turns.test_faults import doomed

pytestmark = pytest.mark.django_db(transaction=True)

ASKED = "Where did my message go?"


@pytest.fixture(autouse=True)
def quick_claims(settings):
    settings.ROJO_TURN_STALE_SECONDS = 2


def killed_before_start(server_process, client, project, rojo, key: str, conversation=None):
    """Send ASKED with `key` (to `conversation`, else a new one) through a server that hangs
    before START; kill it once the message is stored. The request ends with no status."""
    server = doomed(
        server_process,
        ROJO_TOOL_MODULES="tests.support.crash_points",
        ROJO_TEST_HANG_BEFORE_START="1",
    )
    sender = client(server.base_url)
    answered: list[int] = []

    def send() -> None:
        body = {"rojo": rojo.slug, "message": ASKED, "key": key, "conversation": conversation}
        with contextlib.suppress(httpx2.HTTPError):  # the server is killed under it
            answered.append(sender.post(f"/api/projects/{project.pk}/chat", json=body).status_code)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    wait_until(lambda: Message.objects.filter(content=ASKED).exists())
    server.kill()
    thread.join(timeout=10)
    assert not thread.is_alive() and answered == []


def test_a_chat_killed_before_start_is_found_by_its_key_and_reads_interrupted(
    client_for, users, project, fake_provider, server_process
):
    rojo = make_rojo(fake_provider.base_url)
    key = "k-3f2a9c"

    def client(base_url):
        return client_for(users["editor"], base_url=base_url)

    killed_before_start(server_process, client, project, rojo, key)

    survivor = client_for(users["editor"])
    url = f"/api/projects/{project.pk}/conversations"

    def listed() -> list[dict]:
        response = survivor.get(url, params={"key": key})
        assert response.status_code == 200, response.text
        return response.json()

    wait_until(lambda: [c["status"] for c in listed()] == ["failed"])
    (found,) = listed()
    assert found["title"] == ASKED
    assert [c["id"] for c in survivor.get(url).json()] == [found["id"]]
    detail = survivor.get(f"/api/conversations/{found['id']}").json()
    assert detail["running"] is False
    (turn,) = detail["turns"]
    assert (turn["status"], turn["error"]) == ("interrupted", INTERRUPTED_MESSAGE)
    assert [m["content"] for m in detail["messages"]] == [ASKED]
    # The key is the sender's: another member, or another key, finds nothing.
    others = client_for(users["owner"]).get(url, params={"key": key})
    assert others.status_code == 200 and others.json() == []
    assert survivor.get(url, params={"key": "k-other"}).json() == []


def test_a_message_to_a_conversation_killed_before_start_is_found_there_by_its_key(
    client_for, users, project, fake_provider, server_process
):
    """The key of the latest message names its conversation, new or not."""
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("First reply.")))
    survivor = client_for(users["editor"])
    first = survivor.chat(project.pk, rojo=rojo.slug, message="Hello", key="k-first")
    conversation = first[0].data["conversation"]

    def client(base_url):
        return client_for(users["editor"], base_url=base_url)

    killed_before_start(server_process, client, project, rojo, "k-second", conversation)

    url = f"/api/projects/{project.pk}/conversations"
    (found,) = survivor.get(url, params={"key": "k-second"}).json()
    assert found["id"] == conversation
    assert survivor.get(url, params={"key": "k-first"}).json() == []
    detail = survivor.get(f"/api/conversations/{conversation}").json()
    assert [m["content"] for m in detail["messages"]][-1] == ASKED
    assert [t["status"] for t in detail["turns"]] == ["done", "interrupted"]
