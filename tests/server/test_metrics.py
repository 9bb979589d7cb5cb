"""/metrics: Prometheus' text for the addresses and the token an admin named, 404 for anyone
else; the figures move with what the app does."""

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.fake_provider import (
    http_error,
    stream,
    text_chunks,
    tool_call_chunks,
    usage_chunk,
)
from tests.support.helpers import make_rojo
from tests.support.live_server import ApiClient

pytestmark = pytest.mark.django_db(transaction=True)


def samples(text: str) -> dict[tuple, float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_metrics_are_refused_to_anyone_not_named(asgi_server, settings):
    settings.ROJO_METRICS_ALLOWED = ["10.0.0.0/8"]
    settings.ROJO_METRICS_TOKEN = "scrape-token-0123456789"

    plain = httpx2.get(asgi_server + "/metrics")
    wrong = httpx2.get(asgi_server + "/metrics", headers={"Authorization": "Bearer nope"})

    assert (plain.status_code, wrong.status_code) == (404, 404)
    assert "rojo_" not in plain.text + wrong.text


def test_a_named_address_or_the_token_reads_the_figures(asgi_server, settings):
    settings.ROJO_METRICS_TOKEN = "scrape-token-0123456789"
    token = {"Authorization": "Bearer scrape-token-0123456789"}
    by_token = httpx2.get(asgi_server + "/metrics", headers=token)
    settings.ROJO_METRICS_TOKEN = ""
    settings.ROJO_METRICS_ALLOWED = ["127.0.0.1"]
    by_address = httpx2.get(asgi_server + "/metrics")

    for answer in (by_token, by_address):
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/plain; version=")
        assert ("rojo_turns_running", ()) in samples(answer.text)


def test_the_figures_count_a_turn_its_tool_call_its_tokens_and_a_provider_failure(
    asgi_server, settings, users, project, fake_provider
):
    settings.ROJO_METRICS_ALLOWED = ["127.0.0.1"]
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(
        stream(*tool_call_chunks([("create_directory", {"path": "docs"})]), usage_chunk(40, 5)),
        stream(*text_chunks("Made docs."), usage_chunk(60, 3)),
        http_error(500),
    )
    before = samples(httpx2.get(asgi_server + "/metrics").text)
    client = ApiClient(asgi_server, users["editor"])

    client.chat(project.pk, rojo=rojo.pk, message="Make docs")
    failed = client.chat(project.pk, rojo=rojo.pk, message="Again")
    client.close()

    after = samples(httpx2.get(asgi_server + "/metrics").text)

    def grew(name: str, **labels) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    assert failed[-2].type == "ERROR"
    assert grew("rojo_turns_started_total") == 2
    assert grew("rojo_turns_ended_total", outcome="done") == 1
    assert grew("rojo_turns_ended_total", outcome="error") == 1
    assert grew("rojo_tool_calls_total", tool="create_directory", outcome="ok") == 1
    assert grew("rojo_tokens_total", direction="in") == 100
    assert grew("rojo_tokens_total", direction="out") == 8
    assert grew("rojo_provider_first_chunk_seconds_count") == 2
    assert grew("rojo_turn_first_event_seconds_count") == 1  # the failed one had none
    assert grew("rojo_provider_errors_total", kind="http_5xx") == 1
    assert after[("rojo_turns_running", ())] == 0
