"""The verification story against a real provider, when ROJO_LIVE_* name one (else skipped)."""

import os

import pytest

from roject.storage import project_root
from rojos.models import Rojo
from tests.support.helpers import STORY, assert_history_valid, stored_history
from tests.support.live_server import ApiClient

LIVE = {name: os.environ.get(f"ROJO_LIVE_{name}", "") for name in ("BASE_URL", "API_KEY", "MODEL")}

pytestmark = [
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not (LIVE["BASE_URL"] and LIVE["MODEL"]),
        reason="set ROJO_LIVE_BASE_URL, ROJO_LIVE_API_KEY and ROJO_LIVE_MODEL to run",
    ),
]


def test_verification_story_against_a_real_provider(asgi_server, users, project, settings):
    settings.ROJO_PROVIDER_TIMEOUT = 180
    rojo = Rojo.objects.create(
        name="Live",
        slug="live",
        base_url=LIVE["BASE_URL"],
        model=LIVE["MODEL"],
        api_key=LIVE["API_KEY"],
        system_prompt=(
            "You work on the user's project files through your tools. Paths are relative to "
            "the project root. Do what is asked with the tools, then answer with one sentence."
        ),
    )
    client = ApiClient(asgi_server, users["editor"])
    try:
        events = client.chat(project.pk, rojo=rojo.slug, message=STORY)
    finally:
        client.close()

    assert [e for e in events if e.type == "ERROR"] == []
    assert events[-1].type == "DONE"
    calls = {e.data["name"] for e in events if e.type == "TOOL_CALL"}
    assert "write_text_content" in calls
    assert all(e.data["ok"] for e in events if e.type == "TOOL_RESULT")
    page = project_root(project.pk) / "docs" / "intro" / "index.page"
    assert page.is_file() and page.read_text().strip()
    assert any(e.type == "CHAT" for e in events)
    assert_history_valid(stored_history(events[0].data["conversation"]))
