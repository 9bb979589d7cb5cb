"""The provider self-test from its three doors: `manage.py test_rojo`, the admin, the API."""

import io
import os
import subprocess
import sys

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.urls import reverse

from rojos.context.discovery import window_discovery_forget
from rojos.models import Rojo
from rojos.models.capabilities import capabilities_for
from tests.support.helpers import make_rojo
from tests.support.own_services import free_port
from tests.support.provider_profiles import use_profile
from tests.support.server_process import database_url

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "sk-test-secret-key-123"


@pytest.fixture(autouse=True)
def _forget_windows():
    window_discovery_forget()


def test_the_command_prints_the_table_and_keeps_the_profile(fake_provider):
    use_profile(fake_provider, "llamacpp-single")
    rojo = make_rojo(fake_provider.base_url)
    out = io.StringIO()

    call_command("test_rojo", rojo.slug, stdout=out)

    text = out.getvalue()
    assert "two calls in one response     does not  one call at a time" in text
    assert "the listed window and models  works     window 4,096 tokens" in text
    assert SECRET not in text
    rojo.refresh_from_db()
    assert capabilities_for(rojo).parallel_calls is False and rojo.listed_window == 4096


def test_the_command_tests_another_model_and_refuses_an_unknown_rojo(fake_provider):
    use_profile(fake_provider, "vllm")
    rojo = make_rojo(fake_provider.base_url)

    call_command("test_rojo", rojo.slug, "--model", "other-model", stdout=io.StringIO())

    rojo.refresh_from_db()
    assert list(rojo.capability_profiles) == ["other-model"]
    assert rojo.listed_window is None  # learned for the rojo's own model only
    with pytest.raises(CommandError, match="No rojo with the slug 'nobody'"):
        call_command("test_rojo", "nobody")


def test_the_command_that_verified_nothing_exits_3_and_says_so(storage_dir):
    """A provider out of reach leaves every check unknown: the command exited 0 as if it
    passed; it prints the table, then says nothing was verified, with status 3."""
    rojo = make_rojo(f"http://127.0.0.1:{free_port()}/v1")  # nothing listens there
    env = {**os.environ, "DATABASE_URL": database_url(), "ROJO_STORAGE_DIR": str(storage_dir)}

    done = subprocess.run(
        [sys.executable, "manage.py", "test_rojo", rojo.slug],
        cwd=django_settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert done.returncode == 3, done.stderr
    assert "a streamed answer" in done.stdout and "unknown" in done.stdout
    assert "Nothing was verified: every check is unknown (the first: Could not connect" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr and SECRET not in done.stdout + done.stderr


def test_the_admin_action_shows_the_table_and_the_change_page_keeps_it(admin_client, fake_provider):
    use_profile(fake_provider, "mistral")
    rojo = make_rojo(fake_provider.base_url)

    response = admin_client.post(
        reverse("admin:rojos_rojo_changelist"),
        {"action": "provider_selftest", "_selected_action": [rojo.pk]},
        follow=True,
    )

    html = response.content.decode()
    assert "a refused option recovered" in html and "refused stream_options" in html
    assert SECRET not in html
    change = admin_client.get(reverse("admin:rojos_rojo_change", args=[rojo.pk])).content
    assert "typed thinking parts in content" in change.decode()
    assert Rojo.objects.get(pk=rojo.pk).stream_usage_refused is True


def test_the_api_tests_a_rojo_for_administrators_only(client_for, users, fake_provider):
    use_profile(fake_provider, "openai")
    rojo = make_rojo(fake_provider.base_url)
    staff = users["owner"]
    staff.is_staff = True
    staff.save()

    refused = client_for(staff).post(f"/api/rojos/{rojo.slug}/selftest", json={})
    staff.user_permissions.add(Permission.objects.get(codename="change_rojo"))
    answered = client_for(staff).post(f"/api/rojos/{rojo.slug}/selftest", json={})
    missing = client_for(staff).post("/api/rojos/nobody/selftest", json={})
    editor = client_for(users["editor"]).post(f"/api/rojos/{rojo.slug}/selftest", json={})

    assert (refused.status_code, missing.status_code, editor.status_code) == (403, 404, 403)
    assert answered.status_code == 200, answered.text
    body = answered.json()
    rows = {r["capability"]: (r["status"], r["detail"]) for r in body["results"]}
    assert rows["options"] == ("works", {"refused": ["parallel_tool_calls"]})
    assert rows["parallel_calls"][0] == "works" and body["model"] == "fake-model"
    assert SECRET not in answered.text


def test_the_api_that_verified_nothing_answers_502_with_the_table(client_for, users):
    """A provider out of reach: the API answered 200 with every check unknown, which a
    script took for a pass (test_rojo exits 3, the admin warns); now a 502, as for a model
    list the provider refuses, saying so, with the table and its reasons, profile kept."""
    rojo = make_rojo(f"http://127.0.0.1:{free_port()}/v1")  # nothing listens there
    staff = users["owner"]
    staff.is_staff = True
    staff.save()
    staff.user_permissions.add(Permission.objects.get(codename="change_rojo"))

    answered = client_for(staff).post(f"/api/rojos/{rojo.slug}/selftest", json={})

    assert answered.status_code == 502, answered.text
    body = answered.json()
    assert body["detail"].startswith(
        "Nothing was verified: every check is unknown (the first: Could not connect"
    )
    assert body["rojo"] == rojo.slug and body["model"] == rojo.model
    assert {r["status"] for r in body["results"]} == {"unknown"} and len(body["results"]) == 8
    rojo.refresh_from_db()
    assert list(rojo.capability_profiles) == [rojo.model]


def test_a_new_base_url_in_the_admin_forgets_the_old_providers_profiles(admin_client):
    """Profiles are of a provider's models: another endpoint starts untested; another
    model on the same endpoint keeps them (each is kept by model name)."""
    from tests.web.test_admin import change_url, rojo_form

    profile = {"taken": "2026-12-05T10:00:00+00:00", "results": {}}
    rojo = make_rojo(
        "https://api.example.com/v1",
        slug="admin-rojo",
        model="example-model",
        capability_profiles={"example-model": profile},
    )

    admin_client.post(change_url(rojo), rojo_form(model="other-model", api_key=SECRET))
    rojo.refresh_from_db()
    kept = set(rojo.capability_profiles)
    admin_client.post(
        change_url(rojo),
        rojo_form(model="other-model", base_url="https://llm.example.org/v1", api_key=SECRET),
    )
    rojo.refresh_from_db()

    assert kept == {"example-model"} and rojo.model == "other-model"
    assert rojo.base_url == "https://llm.example.org/v1" and rojo.capability_profiles == {}


def test_the_change_pages_button_tests_the_rojo_and_shows_its_table(admin_client, fake_provider):
    use_profile(fake_provider, "llamacpp-single")
    rojo = make_rojo(fake_provider.base_url)
    change = reverse("admin:rojos_rojo_change", args=[rojo.pk])
    button = reverse("admin:rojos_rojo_selftest", args=[rojo.pk])

    before = admin_client.get(change).content.decode()
    assert admin_client.get(button).status_code == 405 and fake_provider.requests == []
    response = admin_client.post(button, follow=True)

    assert f'action="{button}"' in before and "not tested yet" in before
    assert response.redirect_chain == [(change, 302)]
    html = response.content.decode()
    assert "one call at a time" in html and "window 4,096 tokens" in html
    assert SECRET not in html


def test_the_change_pages_button_warns_when_it_verified_nothing(admin_client):
    """A provider out of reach: the table came as a success message, as if it passed."""
    rojo = make_rojo(f"http://127.0.0.1:{free_port()}/v1")  # nothing listens there
    button = reverse("admin:rojos_rojo_selftest", args=[rojo.pk])

    html = admin_client.post(button, follow=True).content.decode()

    assert '<li class="warning">Test rojo: Nothing was verified: every check is unknown.' in html
    assert "Could not connect to the provider" in html and "success" not in html


def test_staff_who_may_only_view_rojos_cannot_test_one(client, users, fake_provider):
    rojo = make_rojo(fake_provider.base_url)
    viewer = users["viewer"]
    viewer.is_staff = True
    viewer.save()
    viewer.user_permissions.add(Permission.objects.get(codename="view_rojo"))
    client.force_login(viewer)

    button = reverse("admin:rojos_rojo_selftest", args=[rojo.pk])
    page = client.get(reverse("admin:rojos_rojo_change", args=[rojo.pk])).content.decode()
    response = client.post(button)

    assert "not tested yet" in page and f'action="{button}"' not in page
    assert response.status_code == 403
    assert fake_provider.requests == []
