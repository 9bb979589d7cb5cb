"""Personal API tokens: stored hashed, made by the command, sent as a bearer on /api.

A bearer request is its token's user's and needs no CSRF token; a read-only token only
reads; an unknown, expired or revoked token is 401 with a Bearer challenge, never tried as
a session.
"""

import hashlib
import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from roject.identity.tokens import api_token_check, api_token_create, api_token_revoke
from roject.models import ApiToken

pytestmark = pytest.mark.django_db


def bearer(secret: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


def test_a_token_is_shown_once_and_only_its_digest_is_stored(users):
    """The secret starts with rojo_, is long and random; the row holds its SHA-256 digest
    and a short prefix, never the secret."""
    made = api_token_create(user=users["editor"], name="  my   laptop ", expires_days=30)
    secret = made.secret
    assert secret.startswith("rojo_") and len(secret) == 45
    row = ApiToken.objects.get()
    assert row.digest == hashlib.sha256(secret.encode()).hexdigest()
    assert row.prefix == secret[:11] and row.name == "my laptop"
    assert secret not in str(list(ApiToken.objects.values()))
    assert api_token_create(user=users["editor"], name="other").secret != secret
    assert api_token_check(secret).user == users["editor"]


def test_the_command_prints_a_token_once_with_its_options(users):
    """create_api_token prints the token alone; --read-only and --expires-days are kept;
    an unknown user or a bad expiry is a one-line error."""
    out = io.StringIO()
    call_command(
        "create_api_token",
        "--user",
        "editor",
        "--name",
        "ci",
        "--read-only",
        "--expires-days",
        "7",
        stdout=out,
    )
    secret = out.getvalue().strip()
    token = api_token_check(secret)
    assert (token.name, token.read_only) == ("ci", True)
    assert 6.99 < (token.expires - timezone.now()).total_seconds() / 86400 <= 7
    with pytest.raises(CommandError, match="no user 'nobody'"):
        call_command("create_api_token", "--user", "nobody", "--name", "x")
    with pytest.raises(CommandError, match="1 to 3650 days"):
        call_command("create_api_token", "--user", "editor", "--name", "x", "--expires-days", "0")


def test_a_bearer_token_reads_the_api_as_its_user_and_is_seen_as_used(users, project):
    secret = api_token_create(user=users["viewer"], name="script").secret
    answer = Client().get("/api/projects", **bearer(secret))
    assert answer.status_code == 200
    assert [p["slug"] for p in answer.json()] == [project.slug]
    assert answer.json()[0]["role"] == "viewer"
    assert ApiToken.objects.get().last_used is not None


def test_a_bearer_request_needs_no_csrf_token_where_a_session_does(users, project):
    """The same POST without a CSRF token: refused for the session, let through (to its
    404) for the bearer; a read-only token is refused any POST."""
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(users["editor"])
    assert browser.post("/api/changes/999/undo").status_code == 403

    script = Client(enforce_csrf_checks=True)
    secret = api_token_create(user=users["editor"], name="script").secret
    answer = script.post("/api/changes/999/undo", **bearer(secret))
    assert (answer.status_code, answer.json()) == (404, {"detail": "No such change."})

    read_only = api_token_create(user=users["editor"], name="ro", read_only=True).secret
    refused = script.post("/api/changes/999/undo", **bearer(read_only))
    assert (refused.status_code, refused.json()) == (
        403,
        {"detail": "This API token is read-only."},
    )
    assert script.get("/api/projects", **bearer(read_only)).status_code == 200


def test_unknown_expired_and_revoked_tokens_are_401_with_a_bearer_challenge(users):
    expired = api_token_create(user=users["editor"], name="old", expires_days=1)
    ApiToken.objects.filter(pk=expired.token.pk).update(expires=timezone.now())
    revoked = api_token_create(user=users["editor"], name="gone")
    api_token_revoke(user=users["editor"], token_id=revoked.token.pk)
    logged_in = Client()
    logged_in.force_login(users["editor"])  # a bad token is not tried as the session

    for header in (
        f"Bearer {expired.secret}",
        f"Bearer {revoked.secret}",
        "Bearer rojo_" + "A" * 40,
        "Bearer ",
        "Basic ZWRpdG9yOnB3LWVkaXRvcg==",
    ):
        answer = logged_in.get("/api/projects", HTTP_AUTHORIZATION=header)
        assert answer.status_code == 401, header
        assert answer["WWW-Authenticate"] == 'Bearer error="invalid_token"'


def test_tokens_are_revoked_only_by_their_owner(users):
    made = api_token_create(user=users["editor"], name="mine")
    assert api_token_revoke(user=users["viewer"], token_id=made.token.pk) is False
    assert Client().get("/api/projects", **bearer(made.secret)).status_code == 200
    assert api_token_revoke(user=users["editor"], token_id=made.token.pk) is True
    assert Client().get("/api/projects", **bearer(made.secret)).status_code == 401


def test_staff_who_may_only_view_tokens_cannot_revoke_one(users):
    """Django offers an action to whoever sees the list unless it names a permission."""
    from django.contrib.auth.models import Permission

    root = get_user_model().objects.create_superuser("root", password="pw-root")
    made = api_token_create(user=root, name="automation")
    staff = users["viewer"]
    staff.is_staff = True
    staff.save()
    staff.user_permissions.add(Permission.objects.get(codename="view_apitoken"))
    client = Client()
    client.force_login(staff)

    page = client.get("/admin/roject/apitoken/").content.decode()
    action = {"action": "revoke", "_selected_action": [made.token.pk]}
    client.post("/admin/roject/apitoken/", action)

    assert made.token.prefix in page and 'value="revoke"' not in page
    assert ApiToken.objects.get().revoked is None


def test_the_admin_lists_tokens_by_prefix_revokes_them_and_names_mcp_changes(users, project):
    """Operators see every token by its prefix (never its secret) and can revoke them; a
    change made through MCP is listed as its user's, via MCP (the token's name)."""
    from django.contrib import admin

    from rojos.models import Conversation, FileChange

    made = api_token_create(user=users["editor"], name="agent")
    staff = get_user_model().objects.create_superuser("root", password="pw-root")
    client = Client()
    client.force_login(staff)
    page = client.get("/admin/roject/apitoken/").content.decode()
    assert made.token.prefix in page and made.secret not in page
    action = {"action": "revoke", "_selected_action": [made.token.pk]}
    client.post("/admin/roject/apitoken/", action)
    assert ApiToken.objects.get().revoked is not None

    conversation = Conversation.objects.create(
        project=project, user=users["editor"], via_mcp=True, via_token=made.token
    )
    change = FileChange.objects.create(
        project=project,
        conversation=conversation,
        tool="write_text_content",
        paths=["a"],
        before=[False],
        after=["x"],
        key="k1",
    )
    assert admin.site._registry[FileChange].by(change) == "editor via MCP (agent)"
