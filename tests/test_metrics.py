"""/metrics: Prometheus' text for the addresses and the token an admin named, 404 for anyone
else; the figures move with what the app does."""

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

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
