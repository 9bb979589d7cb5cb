"""The admin: rojo keys are write-only, projects get a file root, conversations are read-only."""

import io
import re

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from roject.models import Membership, Project, Role
from roject.storage import project_root
from rojos.models import Conversation, Message, Rojo
from rojos.tools import registry
from tests.conftest import make_user
from tests.support.helpers import audited, make_rojo

SECRET = "sk-test-secret-key-123"

pytestmark = pytest.mark.django_db


def rojo_form(**fields) -> dict:
    """POST data for the rojo add/change form."""
    data = {
        "name": "Admin Rojo",
        "slug": "admin-rojo",
        "base_url": "https://api.example.com/v1",
        "model": "example-model",
        "api_key": "",
        "api_key_env": "",
        "system_prompt": "",
        "temperature": "",
        "max_steps": "12",
        "tools": ["list_files", "get_text_content"],
        "instruction_files": "AGENTS.md",
        "request_options": "{}",
        # The MCP servers inline: none.
        "mcp_links-TOTAL_FORMS": "0",
        "mcp_links-INITIAL_FORMS": "0",
    }
    return {**data, **fields}


def change_url(rojo: Rojo) -> str:
    return reverse("admin:rojos_rojo_change", args=[rojo.pk])


def checked_tools(html: str) -> set[str]:
    inputs = re.findall(r'<input[^>]*name="tools"[^>]*>', html)
    return {re.search(r'value="([^"]+)"', tag).group(1) for tag in inputs if "checked" in tag}


def test_rojo_add_form_creates_a_rojo_with_the_key(admin_client):
    response = admin_client.post(
        reverse("admin:rojos_rojo_add"), rojo_form(api_key="sk-new-key-789")
    )

    assert response.status_code == 302
    rojo = Rojo.objects.get(slug="admin-rojo")
    assert rojo.api_key == "sk-new-key-789"
    assert rojo.tools == ["list_files", "get_text_content"]
    assert (rojo.base_url, rojo.model) == ("https://api.example.com/v1", "example-model")


def test_rojo_change_page_never_contains_the_stored_key(admin_client):
    rojo = make_rojo("https://api.example.com/v1", api_key=SECRET)

    change = admin_client.get(change_url(rojo))
    changelist = admin_client.get(reverse("admin:rojos_rojo_changelist"))

    assert change.status_code == 200 and changelist.status_code == 200
    assert SECRET not in change.content.decode()
    assert SECRET not in changelist.content.decode()
    assert re.search(r'<input type="password" name="api_key"[^>]*>', change.content.decode())


def test_staff_who_may_only_view_rojos_see_no_key_nor_request_options(client, users):
    """A view-only user gets every field as text: the key and the options are left out."""
    rojo = make_rojo(
        "https://api.example.com/v1",
        api_key=SECRET,
        request_options={"extra_headers": {"X-Gateway-Token": "gw-secret-456"}},
    )
    staff = users["viewer"]
    staff.is_staff = True
    staff.save()
    staff.user_permissions.add(Permission.objects.get(codename="view_rojo"))
    client.force_login(staff)

    page = client.get(change_url(rojo)).content.decode()

    assert "<label>Model:</label>" in page  # the rest of the rojo is shown
    assert SECRET not in page and "gw-secret-456" not in page
    assert "<label>Request options:</label>" not in page and "<label>Api key:</label>" not in page
    assert "Key set" in page  # whether a key is set, not what it is


def test_rojo_saved_with_an_empty_key_field_keeps_the_stored_key(admin_client):
    rojo = make_rojo("https://api.example.com/v1", api_key=SECRET)

    response = admin_client.post(
        change_url(rojo), rojo_form(name="Test rojo", slug="test-rojo", model="renamed-model")
    )

    assert response.status_code == 302
    rojo.refresh_from_db()
    assert rojo.model == "renamed-model"
    assert rojo.api_key == SECRET


def test_rojo_saved_with_a_new_key_replaces_the_stored_one(admin_client):
    rojo = make_rojo("https://api.example.com/v1", api_key=SECRET)

    admin_client.post(
        change_url(rojo), rojo_form(name="Test rojo", slug="test-rojo", api_key="sk-rotated")
    )

    rojo.refresh_from_db()
    assert rojo.api_key == "sk-rotated"


def test_rojo_clear_api_key_removes_the_stored_key(admin_client):
    rojo = make_rojo("https://api.example.com/v1", api_key=SECRET)

    response = admin_client.post(
        change_url(rojo),
        rojo_form(
            name="Test rojo", slug="test-rojo", clear_api_key="on", api_key_env="ROJO_KEY_VAR"
        ),
    )

    assert response.status_code == 302
    rojo.refresh_from_db()
    assert rojo.api_key == ""
    assert rojo.api_key_env == "ROJO_KEY_VAR"


def test_rojo_tools_field_lists_every_registered_tool(admin_client):
    """Every tool a rojo can choose; not read_result, which a conversation with a kept
    result offers to every rojo."""
    html = admin_client.get(reverse("admin:rojos_rojo_add")).content.decode()

    offered = set(re.findall(r'<input[^>]*name="tools"[^>]*value="([^"]+)"', html))
    assert offered == set(registry.names()) - {"read_result"}
    for tool in registry:
        if tool.name == "read_result":
            continue
        label = f"{tool.name} (writes)" if tool.writes else tool.name
        assert label in html
    assert "write_text_content (writes)" in html and "list_files (writes)" not in html


def test_rojo_change_page_checks_the_rojos_enabled_tools(admin_client):
    rojo = make_rojo("https://api.example.com/v1", tools=["list_files", "read_path_meta"])

    html = admin_client.get(change_url(rojo)).content.decode()

    assert checked_tools(html) == {"list_files", "read_path_meta"}


def test_project_admin_add_creates_the_file_root_and_memberships(admin_client, admin_user):
    response = admin_client.post(
        reverse("admin:roject_project_add"),
        {
            "name": "From Admin",
            "slug": "from-admin",
            "memberships-TOTAL_FORMS": "1",
            "memberships-INITIAL_FORMS": "0",
            "memberships-MIN_NUM_FORMS": "0",
            "memberships-MAX_NUM_FORMS": "1000",
            "memberships-0-user": str(admin_user.pk),
            "memberships-0-role": Role.OWNER,
        },
    )

    assert response.status_code == 302
    project = Project.objects.get(slug="from-admin")
    assert project_root(project.pk).is_dir()
    assert Membership.objects.get(project=project).user == admin_user


def test_project_admin_change_keeps_an_existing_root(admin_client, project):
    root = project_root(project.pk)
    (root / "notes.txt").write_text("kept")

    response = admin_client.post(
        reverse("admin:roject_project_change", args=[project.pk]),
        {
            "name": "Renamed",
            "slug": project.slug,
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
            "memberships-MIN_NUM_FORMS": "0",
            "memberships-MAX_NUM_FORMS": "1000",
        },
    )

    assert response.status_code == 302
    assert Project.objects.get(pk=project.pk).name == "Renamed"
    assert (root / "notes.txt").read_text() == "kept"


def test_conversation_admin_lists_messages_read_only(admin_client, project, users):
    rojo = make_rojo("https://api.example.com/v1")
    conversation = Conversation.objects.create(
        project=project, rojo=rojo, user=users["editor"], title="Admin view"
    )
    Message.objects.create(
        conversation=conversation, position=0, role="user", content="Please list the files."
    )
    Message.objects.create(
        conversation=conversation,
        position=1,
        role="assistant",
        tool_calls=[
            {"id": "call_1", "type": "function", "function": {"name": "list_files"}},
        ],
    )
    Message.objects.create(
        conversation=conversation,
        position=2,
        role="tool",
        tool_call_id="call_1",
        name="list_files",
        content='[{"name": "README.md", "type": "file"}]',
    )

    response = admin_client.get(reverse("admin:rojos_conversation_change", args=[conversation.pk]))

    assert response.status_code == 200
    html = response.content.decode()
    assert "Please list the files." in html
    assert "call_1" in html and "README.md" in html
    assert not re.search(r'name="messages-\d+-(content|role|position|tool_calls)"', html)
    assert 'name="messages-0-DELETE"' not in html
    assert "messages-__prefix__" not in html
    assert 'name="title"' not in html


def test_conversation_admin_has_no_add_page(admin_client):
    response = admin_client.get(reverse("admin:rojos_conversation_add"))

    assert response.status_code == 403


def test_rojo_approval_tools_are_chosen_among_the_writing_tools(admin_client):
    """Only tools that change files can ask for approval; the choice is saved as listed."""
    html = admin_client.get(reverse("admin:rojos_rojo_add")).content.decode()
    offered = set(re.findall(r'<input[^>]*name="approval_tools"[^>]*value="([^"]+)"', html))
    assert offered == {tool.name for tool in registry if tool.writes}

    response = admin_client.post(
        reverse("admin:rojos_rojo_add"), rojo_form(approval_tools=["delete_path"])
    )

    assert response.status_code == 302
    assert Rojo.objects.get(slug="admin-rojo").approval_tools == ["delete_path"]


def test_a_project_with_conversations_is_deleted_with_them_and_its_files(
    admin_client, project, users, storage_dir, django_capture_on_commit_callbacks
):
    """Conversations cannot be deleted one by one in the admin; with their project, they go."""
    conversation = Conversation.objects.create(
        project=project, rojo=make_rojo("https://api.example.com/v1"), user=users["owner"]
    )
    Message.objects.create(conversation=conversation, position=0, role="user", content="hi")
    (project_root(project.pk) / "notes.txt").write_text("notes")
    url = reverse("admin:roject_project_delete", args=[project.pk])

    assert "permission to delete" not in admin_client.get(url).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(url, {"post": "yes"})

    assert response.status_code == 302
    assert not Project.objects.filter(pk=project.pk).exists()
    assert not Conversation.objects.exists() and not Message.objects.exists()
    assert not (storage_dir / str(project.pk)).exists()


@pytest.mark.parametrize(
    ("options", "saved", "error"),
    [
        ("", {}, None),
        ('{"reasoning_effort": "low"}', {"reasoning_effort": "low"}, None),
        ('"reasoning_effort=low"', None, "request options must be a JSON object"),
        ("[1, 2]", None, "request options must be a JSON object"),
    ],
    ids=["emptied", "object", "string", "list"],
)
def test_rojo_request_options_are_a_json_object_or_nothing(admin_client, options, saved, error):
    rojo = make_rojo("https://api.example.com/v1")
    response = admin_client.post(
        change_url(rojo), rojo_form(name="Test rojo", slug=rojo.slug, request_options=options)
    )

    rojo.refresh_from_db()
    if error:
        assert response.status_code == 200 and error in response.content.decode()
        assert rojo.request_options == {}
    else:
        assert response.status_code == 302
        assert rojo.request_options == saved


@pytest.mark.parametrize(
    ("typed", "saved", "error"),
    [
        ("AGENTS.md, CLAUDE.md", ["AGENTS.md", "CLAUDE.md"], None),
        ("", [], None),
        ("docs/AGENTS.md", None, "is not a plain file name"),
        ("AGENTS.md, ..", None, "is not a plain file name"),
    ],
    ids=["two", "none", "a-path", "dot-dot"],
)
def test_rojo_instruction_files_are_plain_names_typed_with_commas(
    admin_client, typed, saved, error
):
    """The change page shows the names as one line; a path or `..` is refused, keeping the
    stored names."""
    rojo = make_rojo("https://api.example.com/v1")
    assert 'value="AGENTS.md"' in admin_client.get(change_url(rojo)).content.decode()
    response = admin_client.post(
        change_url(rojo), rojo_form(name="Test rojo", slug=rojo.slug, instruction_files=typed)
    )

    rojo.refresh_from_db()
    if error:
        assert response.status_code == 200 and error in response.content.decode()
        assert rojo.instruction_files == ["AGENTS.md"]
    else:
        assert response.status_code == 302
        assert rojo.instruction_files == saved


def checked(html: str, name: str) -> set[str]:
    inputs = re.findall(rf'<input[^>]*name="{name}"[^>]*>', html)
    return {re.search(r'value="([^"]+)"', tag).group(1) for tag in inputs if "checked" in tag}


def test_a_rojo_added_in_the_admin_gets_the_same_defaults_as_create_rojo(admin_client):
    """The add form starts with create_rojo's tools and Ask-before tools checked; saved as
    offered, the rojo has what the command would give it."""
    from django.core.management import call_command

    from rojos.models import default_approval_tools, default_tools

    page = admin_client.get(reverse("admin:rojos_rojo_add")).content.decode()
    assert checked(page, "tools") == set(default_tools())
    assert checked(page, "approval_tools") == set(default_approval_tools())
    assert {"write_text_content", "move_path", "delete_path"} <= checked(page, "approval_tools")

    offered = rojo_form(
        tools=sorted(checked(page, "tools")), approval_tools=sorted(checked(page, "approval_tools"))
    )
    assert admin_client.post(reverse("admin:rojos_rojo_add"), offered).status_code == 302
    call_command(
        "create_rojo", "--name", "Cli Rojo", "--base-url", "https://api.example.com/v1",
        "--model", "example-model", stdout=io.StringIO(),
    )  # fmt: skip
    from_admin = Rojo.objects.get(slug="admin-rojo")
    from_command = Rojo.objects.get(slug="cli-rojo")
    assert sorted(from_admin.tools) == sorted(from_command.tools) == sorted(default_tools())
    assert sorted(from_admin.approval_tools) == sorted(from_command.approval_tools)


def test_the_file_change_filter_says_undone_in_words(admin_client, project):
    """The undo filter offers "Undone" and "Not undone", not "Empty / Not empty", and each
    keeps only its changes."""
    import uuid

    from django.utils import timezone

    from rojos.models import FileChange

    def change(path: str, undone) -> FileChange:
        return FileChange.objects.create(
            project=project, tool="write_text_content", paths=[path], before=[False],
            after=["file:x"], key=uuid.uuid4().hex, undone=undone,
        )  # fmt: skip

    kept, reverted = change("kept.txt", None), change("reverted.txt", timezone.now())
    url = reverse("admin:rojos_filechange_changelist")
    page = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", admin_client.get(url).content.decode()))
    assert "By undo All Undone Not undone" in page
    assert "Not empty" not in page
    for value, expected in [("yes", [reverted]), ("no", [kept])]:
        response = admin_client.get(url, {"undone": value})
        assert list(response.context["cl"].result_list) == expected


def test_project_admin_keeps_the_last_owner(admin_client, project, users):
    """The admin's Members inline follows the Members page's rule: demoting or deleting the
    project's only owner is refused with a message; with another owner kept, it is saved."""
    owner = Membership.objects.get(project=project, role=Role.OWNER)
    url = reverse("admin:roject_project_change", args=[project.pk])

    def post(**owner_form):
        return admin_client.post(
            url,
            {
                "name": project.name,
                "slug": project.slug,
                "memberships-TOTAL_FORMS": "1",
                "memberships-INITIAL_FORMS": "1",
                "memberships-MIN_NUM_FORMS": "0",
                "memberships-MAX_NUM_FORMS": "1000",
                "memberships-0-id": str(owner.pk),
                "memberships-0-project": str(project.pk),
                "memberships-0-user": str(owner.user_id),
                **{f"memberships-0-{key}": value for key, value in owner_form.items()},
            },
        )

    for refused in ({"role": Role.EDITOR}, {"role": Role.OWNER, "DELETE": "on"}):
        response = post(**refused)
        assert response.status_code == 200
        assert "A project needs an owner" in response.content.decode()
        assert Membership.objects.get(pk=owner.pk).role == Role.OWNER

    Membership.objects.filter(project=project, user=users["editor"]).update(role=Role.OWNER)
    assert post(role=Role.VIEWER).status_code == 302
    assert Membership.objects.get(pk=owner.pk).role == Role.VIEWER


def test_membership_changes_in_the_admin_are_audited_one_entry_each(admin_client, project, users):
    """Added, role changed, removed: the Members page's entries, with via admin."""
    newcomer = make_user("newcomer")
    memberships = list(Membership.objects.filter(project=project).order_by("pk"))
    data = {"name": project.name, "slug": project.slug}
    data |= {
        "memberships-TOTAL_FORMS": str(len(memberships) + 1),
        "memberships-INITIAL_FORMS": str(len(memberships)),
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
    }
    for index, membership in enumerate(memberships):
        role = membership.role
        if membership.user == users["editor"]:
            role = Role.VIEWER
        data |= {
            f"memberships-{index}-id": str(membership.pk),
            f"memberships-{index}-project": str(project.pk),
            f"memberships-{index}-user": str(membership.user_id),
            f"memberships-{index}-role": role,
        }
        if membership.user == users["viewer"]:
            data[f"memberships-{index}-DELETE"] = "on"
    last = len(memberships)
    data |= {f"memberships-{last}-user": str(newcomer.pk), f"memberships-{last}-role": "editor"}
    url = reverse("admin:roject_project_change", args=[project.pk])
    assert admin_client.post(url, data).status_code == 302

    entries = audited().filter(action__startswith="member_").order_by("action")
    assert [(e.action, e.object_repr, e.details) for e in entries] == [
        ("member_added", "newcomer", {"role": "editor", "via": "admin"}),
        ("member_removed", "viewer", {"role": "viewer", "via": "admin"}),
        ("member_role_changed", "editor", {"from": "editor", "to": "viewer", "via": "admin"}),
    ]
    assert {e.actor_name for e in entries} == {"admin"}


def test_the_admin_inline_revokes_a_demoted_owners_links_and_marks_a_removal(
    admin_client, project, users
):
    """As on the Members page: a demoted owner's pending links are revoked, and a member
    deleted here is one the sign-in's group mapping must not add back."""
    from roject.members.invitations import invitation_create
    from roject.models import Invitation, MembershipRemoval

    Membership.objects.filter(project=project, user=users["editor"]).update(role=Role.OWNER)
    link = invitation_create(by=users["editor"], project_id=project.pk, role=Role.VIEWER)
    memberships = list(Membership.objects.filter(project=project).order_by("pk"))
    data = {"name": project.name, "slug": project.slug}
    data |= {
        "memberships-TOTAL_FORMS": str(len(memberships)),
        "memberships-INITIAL_FORMS": str(len(memberships)),
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
    }
    for index, membership in enumerate(memberships):
        data |= {
            f"memberships-{index}-id": str(membership.pk),
            f"memberships-{index}-project": str(project.pk),
            f"memberships-{index}-user": str(membership.user_id),
            f"memberships-{index}-role": membership.role,
        }
        if membership.user == users["editor"]:
            data[f"memberships-{index}-role"] = Role.EDITOR
        if membership.user == users["viewer"]:
            data[f"memberships-{index}-DELETE"] = "on"
    url = reverse("admin:roject_project_change", args=[project.pk])
    assert admin_client.post(url, data).status_code == 302
    assert Invitation.objects.get(pk=link.invitation.pk).revoked_at is not None
    assert MembershipRemoval.objects.filter(user=users["viewer"], project=project).exists()


def test_single_sign_on_rows_are_deleted_in_the_admin_one_audit_entry_each(
    admin_client, project, users
):
    """Unlinking a provider account and forgetting a removal: deleted, audited, never
    added or edited by hand."""
    from roject.models import MembershipRemoval, OidcIdentity

    identity = OidcIdentity.objects.create(
        user=users["editor"], issuer="https://idp.example", subject="sub-1"
    )
    removals = [
        MembershipRemoval.objects.create(user=users[name], project=project)
        for name in ("viewer", "editor")
    ]
    assert admin_client.get(reverse("admin:roject_oidcidentity_add")).status_code == 403
    change = admin_client.post(
        reverse("admin:roject_oidcidentity_change", args=[identity.pk]), {"subject": "other"}
    )
    assert change.status_code == 403
    url = reverse("admin:roject_oidcidentity_delete", args=[identity.pk])
    assert admin_client.post(url, {"post": "yes"}).status_code == 302
    listing = reverse("admin:roject_membershipremoval_changelist")
    data = {"action": "delete_audited", "_selected_action": [r.pk for r in removals]}
    assert admin_client.post(listing, data).status_code == 302

    assert not OidcIdentity.objects.exists() and not MembershipRemoval.objects.exists()
    entries = audited().filter(action__in=["sso_unlinked", "member_removal_forgotten"])
    assert sorted((e.action, e.object_repr, e.project_id) for e in entries) == [
        ("member_removal_forgotten", "editor", project.pk),
        ("member_removal_forgotten", "viewer", project.pk),
        ("sso_unlinked", "editor", None),
    ]
    unlinked = entries.get(action="sso_unlinked")
    assert unlinked.details == {"issuer": "https://idp.example", "subject": "sub-1"}
    assert unlinked.actor_name == "admin"
