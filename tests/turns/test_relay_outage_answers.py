"""What a person is told while Redis is down, and what is kept of it: a server process on a
Redis of the test's own (tests/support/own_services.py), killed and started again.

A chat refused then is stored with the 503's own sentence and code; the owners' live count
of approvals says `unavailable` (as a chat re-attach does) and counts again once Redis is back.
"""

import threading

import pytest
from redis.exceptions import RedisError

from rojos.outages import UNAVAILABLE
from tests.support.helpers import make_rojo
from tests.support.live_server import parse_sse, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

RELAY_DOWN_ANSWER = UNAVAILABLE[RedisError]


@pytest.fixture
def on_own_redis(server_process, own_redis):
    return server_process(
        REDIS_URL=own_redis.url, ROJO_PROVIDER_RETRIES="0", ROJO_LIVE_CHECK_SECONDS="0.5"
    )


def test_a_chat_refused_while_redis_is_down_keeps_what_the_person_was_told(
    on_own_redis, own_redis, client_for, users, project, fake_provider
):
    """The 503 says the relay is unreachable; the conversation's failed turn says the same,
    with code `unavailable`, not "see its log" (`internal`)."""
    rojo = make_rojo(fake_provider.base_url)
    client = client_for(users["editor"], base_url=on_own_redis.base_url)
    own_redis.kill()

    response = client.post(
        f"/api/projects/{project.pk}/chat", json={"rojo": rojo.slug, "message": "Hi"}
    )

    assert response.status_code == 503, response.text
    told = response.json()
    assert told["detail"] == RELAY_DOWN_ANSWER
    detail = client_for(users["editor"]).get(f"/api/conversations/{told['conversation']}").json()
    (turn,) = detail["turns"]
    assert (turn["status"], turn["error"], turn["error_code"]) == (
        "error",
        RELAY_DOWN_ANSWER,
        "unavailable",
    )


def _events(client, found: list, many: int) -> None:
    """Read the live count's events into `found` until `many` or the stream's end."""
    with client.http.stream("GET", "/api/approvals/live") as response:
        assert response.status_code == 200
        for event in parse_sse(response.iter_lines()):
            found.append(event)
            if len(found) == many:
                return


def test_the_live_approval_count_says_unavailable_while_redis_is_down_and_counts_again(
    on_own_redis, own_redis, client_for, users
):
    """Open when Redis dies: ERROR `unavailable` with a retry hint, and the stream ends.
    Opened while it is down: the same at once. Once it is back: the count again."""
    owner = client_for(users["owner"], base_url=on_own_redis.base_url)
    before: list = []
    reader = threading.Thread(target=_events, args=(owner, before, 2), daemon=True)
    reader.start()
    wait_until(lambda: len(before) == 1)
    own_redis.kill()
    reader.join(timeout=20)
    assert not reader.is_alive()

    down: list = []
    _events(owner, down, 2)
    own_redis.start()
    back: list = []
    _events(owner, back, 1)

    unavailable = ("ERROR", "unavailable", 2)
    assert [(e.type, e.data.get("count")) for e in before[:1]] == [("count", 0)]
    assert [(e.type, e.data["code"], e.data["retry"]) for e in before[1:]] == [unavailable]
    assert [(e.type, e.data["code"], e.data["retry"]) for e in down] == [unavailable]
    assert "relay" in down[0].data["message"]
    assert [(e.type, e.data["count"]) for e in back] == [("count", 0)]
