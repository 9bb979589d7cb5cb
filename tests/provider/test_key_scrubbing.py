"""A provider error that echoes part of the API key (a prefix, a suffix, the key less a few
characters, a masked form) is scrubbed before it is shown, stored or logged: through a real
turn on the live server, no run of 4 or more of the key's characters past its kind prefix
("sk-proj-") reaches the ERROR event, the stored turn record or the log."""

import logging

import pytest

from rojos.models import TurnRecord
from tests.support.fake_provider import error_chunk, http_error, stream
from tests.support.helpers import make_rojo

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "sk-proj-T3BlbkFJq8ZxW2vN5mR7pL9kD4sH6gY1cA0eUuIoPzXyQwErTy"
SECRET = KEY.removeprefix("sk-proj-")


def openai_401(echo: str) -> dict:
    return {
        "error": {
            "message": f"Incorrect API key provided: {echo}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }


ECHOES = {
    "masked-suffix": http_error(401, openai_401(f"sk-proj-****{KEY[-4:]}")),
    "masked-both-ends": http_error(401, openai_401(f"{KEY[:12]}****{KEY[-6:]}")),
    "prefix": http_error(401, openai_401(KEY[:20] + "...")),
    "all-but-the-last-three": http_error(401, openai_401(KEY[:-3])),
    "all-but-the-first-ten": http_error(401, openai_401(KEY[10:])),
    "a-middle-run": http_error(403, {"detail": f"key fragment {KEY[15:27]} is revoked"}),
    "plain-text-body": http_error(401, f"bad key {KEY[:-2]}"),
    "whole-key": http_error(401, openai_401(KEY)),
    "mid-stream-error": stream(error_chunk(f"upstream refused {KEY[5:-5]}")),
}


def leaked_runs(text: str) -> list[str]:
    """Every run of 4 characters of the key's secret part that appears in `text`."""
    return [SECRET[i : i + 4] for i in range(len(SECRET) - 3) if SECRET[i : i + 4] in text]


@pytest.mark.parametrize("reply", ECHOES.values(), ids=ECHOES.keys())
def test_a_provider_error_echoing_part_of_the_key_is_scrubbed_everywhere(
    client_for, users, project, fake_provider, settings, caplog, reply
):
    settings.ROJO_PROVIDER_RETRIES = 0
    caplog.set_level(logging.DEBUG)
    rojo = make_rojo(fake_provider.base_url, api_key=KEY)
    fake_provider.add(reply)

    events = client_for(users["editor"]).chat(project.pk, rojo=rojo.slug, message="Hi")

    assert [e.type for e in events] == ["START", "ERROR", "DONE"]
    assert fake_provider.headers[0]["authorization"] == f"Bearer {KEY}"  # the key was sent
    shown = events[1].data["message"]
    record = TurnRecord.objects.get(conversation_id=events[0].data["conversation"])
    formatter = logging.Formatter("%(message)s")
    logged = "\n".join(formatter.format(r) for r in caplog.records)
    assert record.error == shown
    assert "***" in shown, shown
    assert shown.startswith("The provider")
    for where, text in {"event": shown, "record": record.error, "log": logged}.items():
        assert leaked_runs(text) == [], (where, text)


def test_the_masked_form_still_reads_as_a_key_error(
    client_for, users, project, fake_provider, settings
):
    """What the user sees keeps the provider's words and the key's public kind prefix."""
    settings.ROJO_PROVIDER_RETRIES = 0
    rojo = make_rojo(fake_provider.base_url, api_key=KEY)
    fake_provider.add(ECHOES["masked-suffix"])
    client = client_for(users["editor"])

    events = client.chat(project.pk, rojo=rojo.slug, message="Hi")

    assert events[1].data["message"] == (
        "The provider rejected the API key: set the API key of the rojo 'Test rojo' in the admin. "
        f"The provider at {fake_provider.base_url}/ answered 401: Incorrect API key provided: "
        "sk-proj-*******. You can find your API key at "
        "https://platform.openai.com/account/api-keys."
    )
