"""A rojo's key comes only from variables meant for keys, and a stored key never follows its
base URL to another host: a staff user who may change rojos cannot send SECRET_KEY,
DATABASE_URL or a stored key to a server of their choosing (issue 31, point 1)."""

import io
import time

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.urls import reverse

from rojos.models import Rojo, TurnRecord
from rojos.models.key_sources import endpoint_moved
from tests.conftest import make_user
from tests.support.helpers import audited, command_error, make_rojo, run

pytestmark = pytest.mark.django_db(transaction=True)

STORED_KEY = "sk-stored-key-for-the-real-provider"
RULE = "must be ROJO_API_KEY, start with ROJO_KEY_, or be listed in ROJO_API_KEY_ENV_ALLOWED"


@pytest.fixture
def staff(client_for):
    """An HTTP client on the live server for a staff user whose one permission is to change
    rojos (the attacker of the issue: no superuser, no other admin rights)."""
    user = make_user("rojo-staff")
    user.is_staff = True
    user.save()
    user.user_permissions.add(Permission.objects.get(codename="change_rojo"))
    return client_for(user)


def change_url(rojo: Rojo) -> str:
    return reverse("admin:rojos_rojo_change", args=[rojo.pk])


def change_form(rojo: Rojo, **fields) -> dict:
    """The rojo's change form as posted with nothing changed, then `fields`."""
    data = {
        "name": rojo.name,
        "slug": rojo.slug,
        "base_url": rojo.base_url,
        "model": rojo.model,
        "api_key": "",
        "api_key_env": rojo.api_key_env,
        "system_prompt": "",
        "temperature": "",
        "max_steps": "12",
        "tools": ["list_files"],
        "approval_tools": [],
        "request_options": "{}",
        "mcp_links-TOTAL_FORMS": "0",
        "mcp_links-INITIAL_FORMS": "0",
    }
    return {**data, **fields}


@pytest.mark.parametrize("variable", ["SECRET_KEY", "DATABASE_URL", "ROJO_OIDC_CLIENT_SECRET"])
def test_the_admin_refuses_a_key_variable_outside_the_rule(staff, variable):
    """The issue's attack, through the admin over HTTP: the form answers with the rule and the
    rojo keeps its settings."""
    rojo = make_rojo("https://api.example.com/v1", api_key=STORED_KEY)

    response = staff.post(
        change_url(rojo),
        data=change_form(
            rojo,
            api_key_env=variable,
            clear_api_key="on",
            base_url="https://attacker.example.net/v1",
            confirm_key_env_host="on",
        ),
    )

    assert response.status_code == 200  # the form again, with its error
    assert RULE in response.text
    rojo.refresh_from_db()
    assert (rojo.api_key_env, rojo.api_key) == ("", STORED_KEY)
    assert rojo.base_url == "https://api.example.com/v1"


def test_the_admin_takes_a_key_variable_the_rule_allows(staff, settings):
    rojo = make_rojo("https://api.example.com/v1")
    settings.ROJO_API_KEY_ENV_ALLOWED = "OPENAI_API_KEY"  # as the environment gives it

    for variable in ("ROJO_API_KEY", "ROJO_KEY_OPENAI", "OPENAI_API_KEY"):
        response = staff.post(change_url(rojo), data=change_form(rojo, api_key_env=variable))

        assert response.status_code == 302, response.text
        rojo.refresh_from_db()
        assert rojo.api_key_env == variable


def test_a_new_host_removes_the_stored_key_and_the_form_says_so(staff):
    rojo = make_rojo("https://api.example.com/v1", api_key=STORED_KEY)

    page = staff.get(change_url(rojo))
    response = staff.post(
        change_url(rojo), data=change_form(rojo, base_url="https://attacker.example.net/v1")
    )

    assert "removes the stored key" in page.text
    assert response.status_code == 302
    rojo.refresh_from_db()
    assert (rojo.base_url, rojo.api_key) == ("https://attacker.example.net/v1", "")
    entry = audited().get(action="rojo_changed")
    assert {"base_url", "api_key"} <= set(entry.details["fields"])  # the key's name only
    assert STORED_KEY not in str(entry.details)
    # The messages cookie is Secure (off plain HTTP, as a browser would on https): pass it on.
    staff.http.cookies.set("messages", response.cookies["messages"])
    shown = staff.get(response.headers["location"]).text
    assert "The stored API key of Test rojo was removed" in shown


@pytest.mark.parametrize(
    "base_url",
    ["http://api.example.com/v1", "https://api.example.com:8443/v1", "https://evil.example/v1"],
)
def test_a_new_scheme_host_or_port_removes_the_stored_key(staff, base_url):
    rojo = make_rojo("https://api.example.com/v1", api_key=STORED_KEY)

    staff.post(change_url(rojo), data=change_form(rojo, base_url=base_url))

    rojo.refresh_from_db()
    assert (rojo.base_url, rojo.api_key) == (base_url, "")


def test_a_new_path_on_the_same_host_keeps_the_stored_key(staff):
    rojo = make_rojo("https://api.example.com/v1", api_key=STORED_KEY)

    response = staff.post(
        change_url(rojo), data=change_form(rojo, base_url="https://API.example.com:443/v2")
    )

    assert response.status_code == 302
    rojo.refresh_from_db()
    assert rojo.api_key == STORED_KEY


def test_a_new_host_with_a_new_key_in_the_same_form_keeps_the_new_key(staff):
    rojo = make_rojo("https://api.example.com/v1", api_key=STORED_KEY)

    staff.post(
        change_url(rojo),
        data=change_form(rojo, base_url="https://other.example.org/v1", api_key="sk-new-host"),
    )

    rojo.refresh_from_db()
    assert (rojo.base_url, rojo.api_key) == ("https://other.example.org/v1", "sk-new-host")


def test_a_new_host_with_the_key_from_the_environment_asks_for_a_tick(staff):
    """The variable's key would follow the rojo to the new host: the form says so first."""
    rojo = make_rojo("https://api.example.com/v1", api_key="", api_key_env="ROJO_KEY_PROD")
    moved = change_form(rojo, base_url="https://other.example.org/v1")

    refused = staff.post(change_url(rojo), data=moved)
    rojo.refresh_from_db()
    assert refused.status_code == 200
    assert "tick this to send the key in ROJO_KEY_PROD there" in refused.text
    assert rojo.base_url == "https://api.example.com/v1"

    confirmed = staff.post(change_url(rojo), data={**moved, "confirm_key_env_host": "on"})
    rojo.refresh_from_db()
    assert confirmed.status_code == 302
    assert (rojo.base_url, rojo.api_key_env) == ("https://other.example.org/v1", "ROJO_KEY_PROD")


def test_create_rojo_refuses_a_key_variable_outside_the_rule():
    message = command_error(
        "create_rojo",
        name="Leak",
        base_url="https://attacker.example.net/v1",
        model="m",
        api_key_env="SECRET_KEY",
    )

    assert (
        message
        == f"--api-key-env: 'SECRET_KEY' is not a key variable: a rojo's key variable {RULE}."
    )
    assert not Rojo.objects.exists()


def test_create_rojo_takes_a_variable_of_the_allow_list_read_at_call_time(settings):
    settings.ROJO_API_KEY_ENV_ALLOWED = ["OPENAI_API_KEY"]

    run(
        "create_rojo",
        name="GPT",
        base_url="https://api.openai.com/v1",
        model="m",
        api_key_env="OPENAI_API_KEY",
    )

    assert Rojo.objects.get(slug="gpt").api_key_env == "OPENAI_API_KEY"


def test_the_demo_command_removes_a_key_stored_for_another_host(monkeypatch):
    monkeypatch.setenv("ROJO_BASE_URL", "https://api.example.com/v1")
    run("demo")
    Rojo.objects.filter(slug="demo").update(api_key=STORED_KEY)

    monkeypatch.setenv("ROJO_BASE_URL", "https://api.example.com/v2")
    run("demo")
    assert Rojo.objects.get(slug="demo").api_key == STORED_KEY  # same host: kept

    monkeypatch.setenv("ROJO_BASE_URL", "https://elsewhere.example.org/v1")
    run("demo")
    assert Rojo.objects.get(slug="demo").api_key == ""


def test_the_system_check_names_a_legacy_rojo_that_breaks_the_rule():
    make_rojo("https://api.example.com/v1", slug="legacy", api_key_env="DATABASE_URL")
    make_rojo("https://api.example.com/v1", name="Fine", slug="fine", api_key_env="ROJO_API_KEY")
    err = io.StringIO()

    call_command("check", stdout=io.StringIO(), stderr=err)

    report = err.getvalue()
    assert "rojos.W001" in report
    assert "rojo 'legacy'" in report and "'DATABASE_URL' is not a key variable" in report
    assert RULE in report
    assert "rojo 'fine'" not in report


def test_a_server_process_logs_a_legacy_rojo_that_breaks_the_rule_at_start_up(server_process):
    """ASGI servers run no system checks: the server's start-up hook logs the same warning."""
    make_rojo("https://api.example.com/v1", slug="legacy", api_key_env="SECRET_KEY")

    server = server_process()
    deadline = time.monotonic() + 30  # the check runs on a thread while the server starts
    while "rojos.W001" not in server.log() and time.monotonic() < deadline:
        time.sleep(0.1)

    log = server.log()
    assert "rojo 'legacy'" in log and "'SECRET_KEY' is not a key variable" in log
    assert RULE in log and "(rojos.W001)" in log


@pytest.mark.parametrize("stored_key", [STORED_KEY, ""])
def test_a_chat_with_a_legacy_rojo_that_breaks_the_rule_sends_nothing(
    client_for, users, project, fake_provider, monkeypatch, stored_key
):
    """A row saved before the rule (the admin no longer allows it): the turn ends in an error
    naming the rule, and the provider gets no request, not even a model listing."""
    monkeypatch.setenv("SECRET_KEY", "the-apps-signing-secret")
    rojo = make_rojo(fake_provider.base_url, api_key=stored_key, api_key_env="SECRET_KEY")

    events = client_for(users["editor"]).chat(project.pk, rojo=rojo.slug, message="Hi")

    assert [e.type for e in events] == ["START", "ERROR", "DONE"]
    error = events[1].data
    assert error["code"] == "provider"
    assert "'SECRET_KEY' is not a key variable" in error["message"] and RULE in error["message"]
    assert fake_provider.requests == [] and fake_provider.listing_requests == []
    assert fake_provider.headers == []
    record = TurnRecord.objects.get(conversation_id=events[0].data["conversation"])
    assert record.error == error["message"]


@pytest.mark.parametrize(
    ("before", "after", "moved"),
    [
        ("https://a.example/v1", "https://a.example/v2", False),
        ("https://a.example/v1", "https://A.EXAMPLE:443/v1", False),
        ("http://a.example/v1", "http://a.example:80/x", False),
        ("https://a.example/v1", "http://a.example/v1", True),
        ("https://a.example/v1", "https://a.example:444/v1", True),
        ("https://a.example/v1", "https://b.example/v1", True),
        ("https://a.example/v1", "https://a.example:99999/v1", True),  # does not parse
    ],
)
def test_endpoint_moved_compares_scheme_host_and_port(before, after, moved):
    assert endpoint_moved(before, after) is moved
