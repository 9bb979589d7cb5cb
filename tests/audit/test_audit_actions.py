"""Every audited action, done through its real entry point, writes exactly one audit entry
naming the right action, actor, project and object, and never a secret.

Entry points (the cases are in tests/support/audit_cases.py and
tests/support/audit_file_cases.py): the admin (rojos, MCP servers, tokens, projects), the
management commands, the REST API on the
live ASGI server (with a session or an API token), the tokens page, a rojo's tool call in a
turn on the fake provider, and an outside agent's call over MCP.
"""

import json

import pytest
from django.forms.models import model_to_dict
from django.test import RequestFactory
from django.urls import reverse

from roject.audit.log import audit_actor, audit_record
from roject.models import AuditAction, AuditEntry
from rojos.models import Conversation, Message, default_tools
from tests.support import audit_file_cases  # noqa: F401  (registers its cases)
from tests.support.audit_cases import CASES, KEY, Env
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import audited, make_rojo
from tests.web.test_admin import rojo_form

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def env(users, project, admin_client, client_for, asgi_server, fake_provider, server_process):
    return Env(users, project, admin_client, client_for, asgi_server, fake_provider, server_process)


def _serialized(entry: AuditEntry) -> str:
    return json.dumps(model_to_dict(entry), default=str)


@pytest.mark.parametrize("name", list(CASES))
def test_each_audited_action_writes_exactly_one_entry_without_secrets(name, env):
    act = CASES[name](env)
    before = set(audited().values_list("pk", flat=True))
    expected = act()
    new = list(audited().exclude(pk__in=before))
    assert [entry.action for entry in new] == [expected.action]
    entry = new[0]
    assert (entry.actor_kind, entry.actor_name) == (expected.actor_kind, expected.actor_name)
    assert entry.project_id == expected.project
    assert entry.object_repr == expected.object
    for key, value in expected.details.items():
        assert entry.details[key] == value, entry.details
    assert entry.address == (expected.address if expected.actor_kind != "system" else None)
    for secret in expected.secrets:
        assert secret not in _serialized(entry)
    assert AuditAction(entry.action)


def test_a_single_file_download_is_no_export(env):
    (env.root() / "a.txt").write_text("A")
    answer = env.api().get(
        f"/api/projects/{env.project.pk}/files/download", params={"path": "a.txt"}
    )
    assert answer.status_code == 200 and answer.content == b"A"
    assert list(audited().values_list("details", flat=True)) == []


def test_a_rojo_saved_unchanged_in_the_admin_writes_no_entry(env):
    rojo = make_rojo("https://api.example.com/v1", api_key=KEY)
    data = rojo_form(
        name=rojo.name, slug=rojo.slug, base_url=rojo.base_url, model=rojo.model, tools=rojo.tools
    )
    data.update(max_output_tokens="", approval_tools=rojo.approval_tools)
    assert (
        env.admin.post(reverse("admin:rojos_rojo_change", args=[rojo.pk]), data).status_code == 302
    )
    assert list(audited().values_list("details", flat=True)) == []


def test_undoing_a_turn_writes_one_entry_per_change_it_undid(env):
    """A turn deleted two files (two entries); undoing the turn undoes and audits each."""
    rojo = make_rojo(
        env.fake_provider.base_url, tools=[*default_tools(), "delete_path"], approval_tools=[]
    )
    for name in ("a.md", "b.md"):
        (env.root() / name).write_text(name)
    calls = [("delete_path", {"path": "a.md"}), ("delete_path", {"path": "b.md"})]
    env.fake_provider.add(stream(*tool_call_chunks(calls)), stream(*text_chunks("Done.")))
    events = env.api().chat(env.project.pk, rojo=rojo.slug, message="Delete both")
    assert events[-1].type == "DONE"
    conversation = Conversation.objects.get(project=env.project)
    asked = Message.objects.get(conversation=conversation, role="user")
    deleted = audited().filter(action="file_deleted").order_by("at", "id")
    assert [e.object_repr for e in deleted] == ["a.md", "b.md"]
    answer = env.api().post(
        f"/api/conversations/{conversation.pk}/undo-turn", json={"message": asked.pk}
    )
    assert answer.status_code == 200, answer.text
    assert sorted(p.name for p in env.root().iterdir()) == ["a.md", "b.md"]
    undos = audited().filter(action="undo")
    assert sorted(e.details["paths"] for e in undos) == ["a.md", "b.md"]
    assert {(e.actor_name, e.project_id) for e in undos} == {("editor", env.project.pk)}


@pytest.mark.parametrize(
    ("proxies", "remote", "forwarded", "address"),
    [
        (0, "192.0.2.1", "203.0.113.5", "192.0.2.1"),
        (1, "10.0.0.1", "198.51.100.1, 203.0.113.5", "203.0.113.5"),
        (2, "10.0.0.1", "198.51.100.1, 203.0.113.5", "198.51.100.1"),
        (0, "2001:db8::1", "", "2001:db8::1"),  # the address itself, not the /64 limits count
        (0, "::ffff:192.0.2.9", "", "192.0.2.9"),
        (1, "10.0.0.1", "not-an-ip", None),
    ],
)
def test_the_recorded_address_is_the_client_as_the_proxy_setting_says(
    settings, users, proxies, remote, forwarded, address
):
    settings.ROJO_PROXY_COUNT = proxies
    request = RequestFactory().get("/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=forwarded)
    request.user = users["viewer"]
    entry = audit_record(action=AuditAction.EXPORT, actor=audit_actor(request))
    assert entry.address == address and entry.actor_name == "viewer"
