"""The last owner stays under concurrency in the group mapping too: two last owners whose
groups no longer make them owners, signing in at the same moment, leave one owner. Before,
each sign-in saw the other still an owner (its change not committed yet) and both lost the
role, leaving the project with nobody to manage it."""

import threading

import pytest
from django.db import connection, connections

from roject.identity.oidc.roles import membership_sync_from_groups
from roject.members.projects import project_create
from roject.models import AuditEntry, Membership, MembershipSource, Role
from tests.conftest import make_user
from tests.support.live_server import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def _waiting_on_locks() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def test_two_last_owners_signing_in_at_once_leave_one_owner(settings):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite serializes every transaction that writes")
    settings.ROJO_OIDC_GROUP_ROLES = [("docs-admins", "docs", "owner")]
    ann, bob = make_user("ann"), make_user("bob")
    docs = project_create(name="Docs", owner=ann, members={bob: Role.OWNER})
    assert docs.slug == "docs"
    Membership.objects.filter(project=docs).update(source=MembershipSource.OIDC)

    # Holds back every audit entry, so that both sign-ins are inside their transactions,
    # past their decisions, before either commits.
    holder = connections.create_connection("default")
    holder.set_autocommit(False)
    with holder.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {AuditEntry._meta.db_table} IN SHARE MODE")

    failures = []

    def sign_in(user):
        try:
            membership_sync_from_groups(user=user, groups=set(), address=None)
        except Exception as exc:  # reported below, with the thread's own error
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=sign_in, args=(user,)) for user in (ann, bob)]
    for thread in threads:
        thread.start()
    # Both must wait: committing after a timeout instead let a loaded machine run the two
    # sign-ins one after the other, which passes whether or not they are serialised.
    try:
        wait_until(lambda: _waiting_on_locks() >= 2, timeout=60)
    finally:
        holder.commit()
        holder.close()
    for thread in threads:
        thread.join(10)

    assert failures == []
    owners = Membership.objects.filter(project=docs, role=Role.OWNER)
    assert owners.count() == 1
