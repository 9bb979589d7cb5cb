"""Logins, failed logins and logouts each write exactly one audit entry, with the client's
address; the password never reaches the log."""

import pytest
from django.test import Client

from roject.models import AuditAction, AuditEntry
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def limits(settings):
    settings.ROJO_LOGIN_USER_FAILURES = 2
    settings.ROJO_LOGIN_ADDRESS_FAILURES = 10
    settings.ROJO_PROXY_COUNT = 0


def log() -> list[tuple[str, str, dict]]:
    return [
        (entry.action, entry.actor_name, entry.details)
        for entry in AuditEntry.objects.order_by("pk")
    ]


def test_a_password_login_and_its_logout_are_one_entry_each(db):
    user = make_user("dana")
    client = Client(REMOTE_ADDR="198.51.100.4")
    response = client.post("/login/", {"username": "dana", "password": "pw-dana"})
    assert response.status_code == 302
    client.post("/logout/")
    assert log() == [
        (AuditAction.LOGIN, "dana", {"via": "password"}),
        (AuditAction.LOGOUT, "dana", {}),
    ]
    entries = list(AuditEntry.objects.order_by("pk"))
    assert [entry.address for entry in entries] == ["198.51.100.4", "198.51.100.4"]
    assert entries[0].object_id == str(user.pk)


def test_a_wrong_password_is_one_failed_login_naming_the_username_not_the_password(db):
    make_user("dana")
    Client().post("/login/", {"username": "dana", "password": "guess-1"})
    assert log() == [(AuditAction.LOGIN_FAILED, "", {"via": "password", "username": "dana"})]
    assert "guess-1" not in str(AuditEntry.objects.get().details)


def test_a_login_refused_by_the_limits_is_a_failed_login_too(db):
    make_user("dana")
    client = Client()
    for guess in ("guess-1", "guess-2", "pw-dana"):
        client.post("/login/", {"username": "dana", "password": guess})
    assert log() == [
        (AuditAction.LOGIN_FAILED, "", {"via": "password", "username": "dana"}),
        (AuditAction.LOGIN_FAILED, "", {"via": "password", "username": "dana"}),
        (
            AuditAction.LOGIN_FAILED,
            "",
            {"via": "password", "username": "dana", "reason": "locked"},
        ),
    ]


def test_the_admin_login_is_audited_like_the_sites(db):
    staff = make_user("sam")
    staff.is_staff = True
    staff.save()
    client = Client()
    client.post("/admin/login/", {"username": "sam", "password": "nope"})
    client.post("/admin/login/", {"username": "sam", "password": "pw-sam"})
    assert log() == [
        (AuditAction.LOGIN_FAILED, "", {"via": "password", "username": "sam"}),
        (AuditAction.LOGIN, "sam", {"via": "password"}),
    ]


def test_a_wrong_old_password_in_the_admin_is_a_failed_login_too(db):
    """The admin's password change checks the old password as a login does: a wrong one is
    audited as a failed login of that user, saying where, and never with the password."""
    staff = make_user("sam")
    staff.is_staff = True
    staff.save()
    client = Client(REMOTE_ADDR="198.51.100.4")
    client.force_login(staff)
    form = {"new_password1": "a-new-long-password-9", "new_password2": "a-new-long-password-9"}
    response = client.post("/admin/password_change/", {"old_password": "guess-1", **form})
    assert response.status_code == 200
    assert log()[1:] == [
        (
            AuditAction.LOGIN_FAILED,
            "",
            {"via": "password", "username": "sam", "reason": "wrong old password"},
        )
    ]
    entry = AuditEntry.objects.filter(action=AuditAction.LOGIN_FAILED).get()
    assert entry.address == "198.51.100.4"
    assert "guess-1" not in str(entry.details)


def test_a_logout_without_a_login_writes_nothing(db):
    assert Client().post("/logout/").status_code == 302
    assert log() == []


def test_the_entry_holds_the_clients_own_address_an_ipv6_one_too(db, settings):
    """The limits count an IPv6 client by its /64; the log names the client itself."""
    settings.ROJO_PROXY_COUNT = 1
    make_user("dana")
    client = Client(REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="2001:db8:1:2::7")
    client.post("/login/", {"username": "dana", "password": "nope"})
    client.post("/login/", {"username": "dana", "password": "pw-dana"})
    client = Client(REMOTE_ADDR="::ffff:192.0.2.9")
    client.post("/login/", {"username": "dana", "password": "pw-dana"})
    assert list(AuditEntry.objects.order_by("pk").values_list("address", flat=True)) == [
        "2001:db8:1:2::7",
        "2001:db8:1:2::7",
        "192.0.2.9",
    ]
