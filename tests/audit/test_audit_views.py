"""Reading the audit log: the admin shows it read-only (superusers too) with filters and
streamed CSV/JSON exports; a project's owners see its entries in the app, others a 404;
`audit_prune` keeps the retention."""

import csv
import io
import json
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from roject.audit.log import AuditAction, audit_record
from roject.members.projects import project_create
from roject.models import AuditEntry
from tests.support.helpers import audited

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE = "docs/<script>alert(1)</script>.md"


@pytest.fixture
def entries(users, project):
    """Three entries in the project (one naming a hostile path), one in another project."""
    other = project_create(name="Other", owner=users["outsider"])
    return {
        "deleted": audit_record(
            action=AuditAction.FILE_DELETED,
            user=users["editor"],
            project=project,
            object_type="file",
            object_id=HOSTILE,
            object_repr=HOSTILE,
        ),
        "undo": audit_record(
            action=AuditAction.UNDO,
            user=users["owner"],
            project=project,
            details={"paths": "<img src=x onerror=alert(2)>"},
        ),
        "export": audit_record(action=AuditAction.EXPORT, user=users["viewer"], project=project),
        "elsewhere": audit_record(action=AuditAction.EXPORT, user=users["outsider"], project=other),
    }


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def streamed(response) -> str:
    """A streamed body, read whole (the test client runs the async stream for it)."""
    assert response.streaming

    async def read() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(read)().decode()


def test_no_one_adds_changes_or_deletes_an_entry_in_the_admin(admin_client, entries):
    """A superuser may look; the change form's POST and the delete page are 403."""
    entry = entries["deleted"]
    change = reverse("admin:roject_auditentry_change", args=[entry.pk])
    delete = reverse("admin:roject_auditentry_delete", args=[entry.pk])
    assert admin_client.get(change).status_code == 200
    assert admin_client.post(change, {"action": "logout", "actor_name": "x"}).status_code == 403
    assert admin_client.get(delete).status_code == 403
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert admin_client.get(reverse("admin:roject_auditentry_add")).status_code == 403
    listing = admin_client.post(
        reverse("admin:roject_auditentry_changelist"),
        {"action": "delete_selected", "_selected_action": [entry.pk], "post": "yes"},
    )
    assert listing.status_code in (200, 302)
    kept = AuditEntry.objects.get(pk=entry.pk)
    assert (kept.action, kept.actor_name, kept.object_repr) == ("file_deleted", "editor", HOSTILE)
    assert audited().count() == 4


def test_the_admin_filters_by_action_actor_kind_project_and_search(admin_client, entries, project):
    url = reverse("admin:roject_auditentry_changelist")

    def shown(**query) -> set[int]:
        response = admin_client.get(url, query)
        assert response.status_code == 200
        return {entry.pk for entry in response.context["cl"].result_list}

    assert shown(action__exact="export") == {entries["export"].pk, entries["elsewhere"].pk}
    assert shown(project=str(project.pk)) == {entries[k].pk for k in ("deleted", "undo", "export")}
    assert shown(actor_kind__exact="user", q="outsider") == {entries["elsewhere"].pk}
    assert shown(q="<script>") == {entries["deleted"].pk}
    page = admin_client.get(url).content.decode()
    assert "<script>alert(1)" not in page and "&lt;script&gt;" in page


def test_the_admin_exports_the_filtered_list_as_csv_and_json_and_audits_that(
    admin_client, entries, project
):
    query = {"project": str(project.pk), "action__exact": "file_deleted"}
    carried = {"utm_source": "mail", "password": "hunter2"}  # not the changelist's filters
    as_csv = admin_client.get(
        reverse("admin:roject_auditentry_export", args=["csv"]), {**query, **carried}
    )
    assert as_csv.status_code == 200 and as_csv["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(streamed(as_csv))))
    assert [(r["action"], r["object_repr"], r["actor_name"]) for r in rows] == [
        ("file_deleted", HOSTILE, "editor")
    ]
    as_json = admin_client.get(reverse("admin:roject_auditentry_export", args=["json"]))
    exported = json.loads(streamed(as_json))
    assert {row["id"] for row in exported} >= {entry.pk for entry in entries.values()}
    exports = AuditEntry.objects.filter(object_type="audit log").order_by("at")
    assert [(e.action, e.actor_name, e.details["format"]) for e in exports] == [
        ("export", "admin", "csv"),
        ("export", "admin", "json"),
    ]
    assert exports[0].details["filters"] == query
    bad = admin_client.get(reverse("admin:roject_auditentry_export", args=["xml"]))
    assert bad.status_code == 404
    bad_date = admin_client.get(
        reverse("admin:roject_auditentry_export", args=["csv"]), {"at__gte": "not a date"}
    )
    assert bad_date.status_code == 400


FORMULAS = ['=HYPERLINK("http://evil.test","x")', "=cmd|' /C calc'!A0", "+1", "-1", "@SUM(A1)"]


def test_cells_that_a_spreadsheet_would_run_as_formulas_are_exported_as_text(
    admin_client, users, project
):
    """A project name, object names and an actor's name that start like a formula (= + - @,
    a tab, a carriage return) get a leading "'" in both CSV exports; the JSON keeps them."""
    project.name = FORMULAS[0]
    project.save(update_fields=["name"])
    for text in [*FORMULAS[1:], "\tTAB", "\rCR"]:
        audit_record(
            action=AuditAction.FILE_DELETED,
            user=users["owner"],
            project=project,
            object_type="file",
            object_repr=text,
        )
    expected = {"'" + text for text in [*FORMULAS[1:], "\tTAB", "\rCR"]}
    admin_csv = admin_client.get(reverse("admin:roject_auditentry_export", args=["csv"]))
    owner_csv = logged_in(users["owner"]).get(
        reverse("project_audit", args=[project.pk]), {"format": "csv"}
    )
    for response in (admin_csv, owner_csv):
        rows = csv.DictReader(io.StringIO(streamed(response)))
        rows = [r for r in rows if r["action"] == AuditAction.FILE_DELETED]
        assert {r["object_repr"] for r in rows} == expected
        assert {r["project_name"] for r in rows} == {"'" + FORMULAS[0]}
    as_json = admin_client.get(reverse("admin:roject_auditentry_export", args=["json"]))
    kept = {row["object_repr"] for row in json.loads(streamed(as_json))}
    assert set(FORMULAS[1:]) <= kept


def test_a_staff_user_without_the_view_permission_cannot_export(users, entries):
    staff = users["editor"]
    staff.is_staff = True
    staff.save()
    answer = logged_in(staff).get(reverse("admin:roject_auditentry_export", args=["csv"]))
    assert answer.status_code == 403
    assert not AuditEntry.objects.filter(object_type="audit log").exists()


def test_owners_see_their_projects_entries_newest_first_escaped(users, project, entries):
    page = logged_in(users["owner"]).get(reverse("project_audit", args=[project.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    shown = [entry.pk for entry in page.context["page"]]
    assert shown == [entries["export"].pk, entries["undo"].pk, entries["deleted"].pk]
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img" not in html and "&quot;paths&quot;: &quot;&lt;img src=x" in html
    project_page = logged_in(users["owner"]).get(reverse("project", args=[project.pk]))
    assert reverse("project_audit", args=[project.pk]) in project_page.content.decode()


@pytest.mark.parametrize("who", ["editor", "viewer", "outsider"])
def test_anyone_but_an_owner_gets_404_and_no_link(users, project, entries, who):
    url = reverse("project_audit", args=[project.pk])
    client = logged_in(users[who])
    assert client.get(url).status_code == 404
    assert client.get(url, {"format": "csv"}).status_code == 404
    if who != "outsider":
        assert url not in client.get(reverse("project", args=[project.pk])).content.decode()
    assert Client().get(url).status_code == 302  # to the login page


def test_the_owner_page_filters_pages_and_downloads(users, project, entries, settings):
    owner = logged_in(users["owner"])
    url = reverse("project_audit", args=[project.pk])
    by_action = owner.get(url, {"action": "undo"})
    assert [e.pk for e in by_action.context["page"]] == [entries["undo"].pk]
    by_actor = owner.get(url, {"actor": "VIEW"})
    assert [e.pk for e in by_actor.context["page"]] == [entries["export"].pk]
    assert list(owner.get(url, {"action": "no-such"}).context["page"]) == []
    for _ in range(55):
        audit_record(action=AuditAction.UNDO, user=users["editor"], project=project)
    first = owner.get(url, {"action": "undo"})
    assert len(first.context["page"]) == 50 and first.context["page"].has_next()
    second = owner.get(url, {"action": "undo", "page": "2"})
    assert len(second.context["page"]) == 6
    assert "action=undo&amp;page=2" in first.content.decode()
    download = owner.get(url, {"action": "undo", "actor": "owner", "format": "json"})
    assert download["Content-Disposition"].startswith("attachment")
    assert [row["id"] for row in json.loads(streamed(download))] == [entries["undo"].pk]
    as_csv = list(csv.DictReader(io.StringIO(streamed(owner.get(url, {"format": "csv"})))))
    assert entries["elsewhere"].pk not in {int(row["id"]) for row in as_csv}
    audited = AuditEntry.objects.filter(object_type="audit log").order_by("at")
    assert [(e.project_id, e.actor_name, e.details["format"]) for e in audited] == [
        (project.pk, "owner", "json"),
        (project.pk, "owner", "csv"),
    ]


def _aged(days: int) -> AuditEntry:
    entry = AuditEntry(action=AuditAction.LOGIN, actor_kind="system")
    entry.at = timezone.now() - timedelta(days=days)
    entry.save()
    return entry


def test_audit_prune_keeps_the_retention_dry_run_counts_and_zero_keeps_all(settings):
    old, recent = _aged(400), _aged(10)
    settings.ROJO_AUDIT_RETENTION_DAYS = 0
    out = io.StringIO()
    call_command("audit_prune", stdout=out)
    assert out.getvalue().startswith("0 audit entries") and AuditEntry.objects.count() == 2
    settings.ROJO_AUDIT_RETENTION_DAYS = 365
    out = io.StringIO()
    call_command("audit_prune", "--dry-run", stdout=out)
    assert out.getvalue().startswith("1 audit entry ") and "would be" in out.getvalue()
    assert AuditEntry.objects.count() == 2
    out = io.StringIO()
    call_command("audit_prune", stdout=out)
    assert out.getvalue().startswith("1 audit entry ") and "pruned" in out.getvalue()
    assert list(AuditEntry.objects.values_list("pk", flat=True)) == [recent.pk]
    out = io.StringIO()
    call_command("audit_prune", "--days", "5", stdout=out)
    assert out.getvalue().startswith("1 audit entry ")
    assert not AuditEntry.objects.filter(pk__in=[old.pk, recent.pk]).exists()


def test_a_large_log_is_exported_in_many_blocks_each_row_once(admin_client):
    """2,500 entries go out as a stream of blocks, not one body held whole."""
    AuditEntry.objects.bulk_create(
        AuditEntry(action=AuditAction.EXPORT, actor_kind="system", object_repr=f"n{n}")
        for n in range(2500)
    )
    response = admin_client.get(reverse("admin:roject_auditentry_export", args=["csv"]))

    async def blocks() -> list[bytes]:
        return [chunk async for chunk in response.streaming_content]

    read = async_to_sync(blocks)()
    assert len(read) >= 20
    rows = list(csv.DictReader(io.StringIO(b"".join(read).decode())))
    assert sorted(r["object_repr"] for r in rows if r["object_repr"].startswith("n")) == sorted(
        f"n{n}" for n in range(2500)
    )
