"""A project's settings page: its owners turn "changes need approval by an owner" on and off
(POST with CSRF), in the app or in the admin; each change is audited once; anyone else gets
404."""

import pytest
from django.test import Client
from django.urls import reverse

from roject.models import AuditAction, AuditEntry, Project

pytestmark = pytest.mark.django_db


def logged_in(user, **options) -> Client:
    client = Client(**options)
    client.force_login(user)
    return client


def changes() -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action=AuditAction.PROJECT_CHANGED))


def test_an_owner_turns_owner_approval_on_and_the_change_is_audited(users, project):
    client = logged_in(users["owner"])
    url = reverse("project_settings", args=[project.pk])
    page = client.get(url)
    assert page.status_code == 200
    assert 'name="owner_approval"' in page.content.decode()

    response = client.post(url, {"owner_approval": "on"})

    assert response.status_code == 302
    project.refresh_from_db()
    assert project.owner_approval is True
    [entry] = changes()
    assert (entry.actor_user_id, entry.project_id) == (users["owner"].pk, project.pk)
    assert entry.details == {"field": "owner_approval", "from": False, "to": True}


def test_saving_the_same_settings_again_audits_nothing(users, project):
    client = logged_in(users["owner"])
    client.post(reverse("project_settings", args=[project.pk]), {})
    assert changes() == []


def test_the_project_page_links_its_settings_for_owners_only(users, project):
    link = reverse("project_settings", args=[project.pk])
    owner_page = logged_in(users["owner"]).get(reverse("project", args=[project.pk]))
    editor_page = logged_in(users["editor"]).get(reverse("project", args=[project.pk]))
    assert link in owner_page.content.decode()
    assert link not in editor_page.content.decode()


@pytest.mark.parametrize("who", ["editor", "viewer", "outsider"])
def test_only_owners_reach_the_settings(users, project, who):
    client = logged_in(users[who])
    url = reverse("project_settings", args=[project.pk])
    assert client.get(url).status_code == 404
    assert client.post(url, {"owner_approval": "on"}).status_code == 404
    project.refresh_from_db()
    assert project.owner_approval is False
    assert changes() == []


def test_a_change_without_csrf_is_refused(users, project):
    client = logged_in(users["owner"], enforce_csrf_checks=True)
    response = client.post(reverse("project_settings", args=[project.pk]), {"owner_approval": "on"})
    assert response.status_code == 403
    project.refresh_from_db()
    assert project.owner_approval is False


BEHIND_A_PROXY = {"REMOTE_ADDR": "10.0.0.1", "HTTP_X_FORWARDED_FOR": "203.0.113.7"}


def test_behind_a_proxy_the_change_records_the_clients_address(users, project, settings):
    settings.ROJO_PROXY_COUNT = 1
    client = logged_in(users["owner"])
    url = reverse("project_settings", args=[project.pk])
    assert client.post(url, {"owner_approval": "on"}, **BEHIND_A_PROXY).status_code == 302
    [entry] = changes()
    assert entry.address == "203.0.113.7"


def admin_change(admin_client, project, **extra):
    url = reverse("admin:roject_project_change", args=[project.pk])
    form = admin_client.get(url).context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None}
    data.update(
        {
            "name": project.name,
            "slug": project.slug,
            "owner_approval": "on",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
        }
    )
    return admin_client.post(url, data, **extra)


def test_the_admin_records_the_clients_address_behind_a_proxy(admin_client, project, settings):
    settings.ROJO_PROXY_COUNT = 1
    response = admin_change(admin_client, project, **BEHIND_A_PROXY)
    assert response.status_code == 302, response.content.decode()[:2000]
    [entry] = changes()
    assert entry.address == "203.0.113.7"


def test_the_admin_changes_the_setting_and_audits_it(admin_client, admin_user, project):
    url = reverse("admin:roject_project_change", args=[project.pk])
    form = admin_client.get(url).context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None}
    data.update(
        {
            "name": project.name,
            "slug": project.slug,
            "owner_approval": "on",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
        }
    )
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Project.objects.get(pk=project.pk).owner_approval is True
    [entry] = changes()
    assert entry.actor_user_id == admin_user.pk
    assert entry.details == {"field": "owner_approval", "from": False, "to": True}
