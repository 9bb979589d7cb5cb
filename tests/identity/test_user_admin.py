"""A staff member given the right to change users cannot raise their own rights through the
admin: not to superuser, not by groups or permissions, not by taking a superuser's or
another staff member's account."""

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def manager():
    """Staff who may view, add and change users, and change groups (a help desk's rights)."""
    user = User.objects.create_user("hal", password="pw-hal-123456", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(
            codename__in=["view_user", "add_user", "change_user", "change_group", "view_group"]
        )
    )
    return user


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def form_of(user: User, **changes) -> dict:
    data = {
        "username": user.username,
        "first_name": "",
        "last_name": "",
        "email": "",
        "is_active": "on",
        "is_staff": "on",
        "last_login_0": "",
        "last_login_1": "",
        "date_joined_0": "2026-12-06",
        "date_joined_1": "10:00:00",
    }
    data.update(changes)
    return data


def test_staff_cannot_make_themselves_superuser_or_grant_themselves_rights(manager):
    group = Group.objects.create(name="everything")
    group.permissions.set(Permission.objects.all())
    client = signed_in(manager)
    page = client.get(f"/admin/auth/user/{manager.pk}/change/")
    assert page.status_code == 200
    assert 'name="is_superuser"' not in page.content.decode()

    answer = client.post(
        f"/admin/auth/user/{manager.pk}/change/",
        form_of(manager, is_superuser="on", groups=[group.pk], user_permissions=[1, 2, 3]),
    )
    assert answer.status_code == 302  # saved, without the fields it may not set
    manager.refresh_from_db()
    assert not manager.is_superuser
    assert not manager.groups.exists()
    assert manager.user_permissions.count() == 5


def test_staff_cannot_reach_a_superusers_account(manager):
    root = User.objects.create_superuser("root", password="pw-root-123456")
    client = signed_in(manager)
    changed = client.post(f"/admin/auth/user/{root.pk}/change/", form_of(root, is_staff=""))
    assert changed.status_code == 403
    answer = client.post(
        f"/admin/auth/user/{root.pk}/password/",
        {"password1": "taken-over-123", "password2": "taken-over-123"},
    )
    assert answer.status_code == 403
    root.refresh_from_db()
    assert root.check_password("pw-root-123456") and root.is_staff


def test_staff_cannot_take_another_staff_members_account(manager):
    """One who may change rojos (whose keys it may point anywhere) is worth becoming."""
    keeper = User.objects.create_user("keeper", password="pw-keeper-123456", is_staff=True)
    keeper.user_permissions.set(Permission.objects.filter(codename__in=["change_rojo"]))
    client = signed_in(manager)
    answer = client.post(
        f"/admin/auth/user/{keeper.pk}/password/",
        {"password1": "taken-over-123", "password2": "taken-over-123"},
    )
    changed = client.post(f"/admin/auth/user/{keeper.pk}/change/", form_of(keeper, is_active=""))
    removed = client.post(f"/admin/auth/user/{keeper.pk}/delete/", {"post": "yes"})

    assert (answer.status_code, changed.status_code, removed.status_code) == (403, 403, 403)
    keeper.refresh_from_db()
    assert keeper.check_password("pw-keeper-123456") and keeper.is_active


def test_staff_still_set_the_password_of_an_account_without_admin_rights(manager):
    member = User.objects.create_user("member", password="pw-member-123456")
    answer = signed_in(manager).post(
        f"/admin/auth/user/{member.pk}/password/",
        {"password1": "Reset-by-desk-123", "password2": "Reset-by-desk-123"},
    )
    assert answer.status_code == 302
    member.refresh_from_db()
    assert member.check_password("Reset-by-desk-123")


def test_staff_cannot_add_rights_to_a_group(manager):
    group = Group.objects.create(name="helpdesk")
    manager.groups.add(group)
    client = signed_in(manager)
    answer = client.post(
        f"/admin/auth/group/{group.pk}/change/",
        {"name": "helpdesk", "permissions": list(Permission.objects.values_list("pk", flat=True))},
    )
    assert answer.status_code == 403
    assert not group.permissions.exists()


def test_a_superuser_still_grants_rights(manager):
    root = User.objects.create_superuser("root", password="pw-root-123456")
    answer = signed_in(root).post(
        f"/admin/auth/user/{manager.pk}/change/", form_of(manager, is_superuser="on")
    )
    assert answer.status_code == 302
    manager.refresh_from_db()
    assert manager.is_superuser
