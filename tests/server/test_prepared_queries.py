"""Hot reads compiled once and run with each call's values (roject/server/prepared_queries.py):
the same objects as the ORM's own queryset, on SQLite and on PostgreSQL, in one query, the
values bound, and whatever could not be checked refused rather than run differently."""

from decimal import Decimal

import pytest
from django.db.models import Q
from django.db.models.functions import Now

from roject.members.access import project_access, project_role
from roject.models import Membership, Project, Role
from roject.server.prepared_queries import PreparedQuery
from rojos.context.budgets import budgets_for
from rojos.models import McpServer, Rojo, RojoMcpServer, UsageBudget
from rojos.web.selectors import rojo_get
from tests.support.helpers import make_rojo

pytestmark = pytest.mark.django_db


def _fields(made) -> dict:
    return {field.attname: getattr(made, field.attname) for field in made._meta.concrete_fields}


def test_a_rojo_comes_out_as_the_orm_makes_it_by_slug_and_by_id():
    """Every field through its converter (JSON, decimals, times, floats), and the
    annotation telling whether it uses MCP servers."""
    plain = make_rojo(
        "http://127.0.0.1:9/v1",
        slug="plain",
        price_input=Decimal("2.50"),
        temperature=0.3,
        request_options={"top_p": 0.9},
    )
    clock = make_rojo("http://127.0.0.1:9/v1", slug="clock")
    server = McpServer.objects.create(name="clock", slug="clock", transport="stdio", command="x")
    RojoMcpServer.objects.create(rojo=clock, server=server)
    for made, ref in (
        (plain, "plain"),
        (plain, plain.pk),
        (plain, str(plain.pk)),
        (clock, "clock"),
    ):
        loaded = rojo_get(ref)
        assert _fields(loaded) == _fields(Rojo.objects.get(pk=made.pk))
        assert not loaded._state.adding and loaded._state.db == "default"
    assert rojo_get("plain").price_input == Decimal("2.50")
    assert rojo_get("plain").request_options == {"top_p": 0.9}
    assert rojo_get("plain").mcp_used is False
    assert rojo_get("clock").mcp_used is True


@pytest.mark.parametrize("ref", ["nope", "x' OR '1'='1", "%", "99999999999999999999", "٣"])
def test_a_rojo_not_there_is_a_404_whatever_the_reference(ref):
    """A value is bound, never spliced into the SQL; digits that are not ASCII, or past a
    bigint, are no id."""
    from django.http import Http404

    make_rojo("http://127.0.0.1:9/v1", slug="plain")
    with pytest.raises(Http404):
        rojo_get(ref)


def test_a_membership_brings_its_project_in_the_same_query(
    users, project, django_assert_num_queries
):
    with django_assert_num_queries(1):
        access = project_access(user=users["editor"], project_id=project.pk)
        assert access.project.name == "Demo Project"  # no second query
    assert access.role == Role.EDITOR
    assert _fields(access.project) == _fields(Project.objects.get(pk=project.pk))
    assert project_role(user=users["viewer"].pk, project_id=project.pk) == Role.VIEWER
    assert project_role(user=users["outsider"], project_id=project.pk) is None
    assert project_role(user=None, project_id=project.pk) is None


def test_each_call_binds_its_own_values(users, project):
    """The compiled SQL is shared; the values are each call's."""
    other = Project.objects.create(name="Other", slug="other")
    Membership.objects.create(user=users["outsider"], project=other, role=Role.OWNER)
    assert project_role(user=users["outsider"], project_id=other.pk) == Role.OWNER
    assert project_role(user=users["outsider"], project_id=project.pk) is None
    assert project_role(user=users["owner"], project_id=project.pk) == Role.OWNER


def test_budgets_of_the_user_and_the_project_in_one_query(users, project, settings):
    settings.ROJO_USER_DAILY_TOKENS = 0
    settings.ROJO_PROJECT_MONTHLY_TOKENS = 0
    UsageBudget.objects.create(user=users["editor"], period="day", max_tokens=100)
    UsageBudget.objects.create(project=project, period="month", max_cost=Decimal("5"))
    UsageBudget.objects.create(user=users["viewer"], period="day", max_tokens=7)  # not theirs
    found = budgets_for(user=users["editor"], project_id=project.pk)
    assert {(b.scope, b.period, b.tokens, b.cost) for b in found} == {
        ("user", "day", 100, None),
        ("project", "month", None, Decimal("5")),
    }


def _prepared(build, *kinds):
    return PreparedQuery(build, *kinds)


def test_what_cannot_be_checked_is_refused_not_run():
    rewritten = _prepared(lambda slug: Rojo.objects.filter(slug__icontains=slug), str)
    with pytest.raises(ValueError, match="rewritten"):
        rewritten.all("plain")
    frozen = _prepared(lambda pk: Rojo.objects.filter(pk=pk, created__lte=Now()), int)
    frozen.all(1)  # the database's clock: SQL, not a value
    from django.utils import timezone

    timed = _prepared(lambda pk: Rojo.objects.filter(pk=pk, created__lte=timezone.now()), int)
    with pytest.raises(ValueError, match="frozen"):
        timed.all(1)
    prefetching = _prepared(
        lambda pk: Rojo.objects.filter(pk=pk).prefetch_related("mcp_links"), int
    )
    with pytest.raises(ValueError, match="prefetch"):
        prefetching.all(1)
    dicts = _prepared(lambda pk: Rojo.objects.filter(pk=pk).values("slug"), int)
    with pytest.raises(ValueError, match="flat column"):
        dicts.all(1)
    unused = _prepared(lambda pk, slug: Rojo.objects.filter(slug=slug), int, str)
    with pytest.raises(ValueError, match="parameter of its own"):
        unused.all(1, "plain")
    with pytest.raises(TypeError):
        _prepared(lambda pk: Rojo.objects.filter(pk=pk), int).all("1")


def test_an_or_of_the_same_marker_twice_binds_it_in_both_places(users, project):
    either = _prepared(
        lambda user_id: Membership.objects.filter(Q(user_id=user_id) | Q(project_id=user_id)),
        int,
    )
    rows = either.all(users["editor"].pk)
    assert users["editor"].pk in [row.user_id for row in rows]
    assert all(row.user_id == users["editor"].pk or row.project_id == users["editor"].pk
               for row in rows)  # fmt: skip


def test_a_conversation_comes_with_its_project_and_rojo(users, project, django_assert_num_queries):
    """Both relations from the one query, as select_related makes them."""
    from rojos.models import Conversation
    from rojos.web.selectors import conversation_access

    rojo = make_rojo("http://127.0.0.1:9/v1", request_options={"top_p": 0.5})
    made = Conversation.objects.create(project=project, rojo=rojo, user=users["editor"], title="t")
    with django_assert_num_queries(2):  # the conversation, then the user's membership
        conversation, access = conversation_access(user=users["editor"], conversation_id=made.pk)
        assert conversation.project.name == "Demo Project"
        assert conversation.rojo.request_options == {"top_p": 0.5}
    assert _fields(conversation) == _fields(Conversation.objects.get(pk=made.pk))
    assert _fields(conversation.rojo) == _fields(rojo)
    assert access.role == Role.EDITOR


def test_a_conversation_whose_rojo_is_gone_has_none(users, project, django_assert_num_queries):
    from rojos.models import Conversation
    from rojos.web.selectors import conversation_access

    made = Conversation.objects.create(project=project, rojo=None, user=users["owner"], title="t")
    with django_assert_num_queries(2):
        conversation, _ = conversation_access(user=users["owner"], conversation_id=made.pk)
        assert conversation.rojo is None
        assert conversation.project.pk == project.pk


def _conversation(users, project, **fields):
    from rojos.models import Conversation

    rojo = make_rojo("http://127.0.0.1:9/v1", slug=f"r{Rojo.objects.count()}")
    return Conversation.objects.create(
        project=project, rojo=rojo, user=users["editor"], title="t", **fields
    )


def test_an_update_sets_what_the_orms_update_sets_in_one_statement(
    users, project, django_assert_num_queries
):
    """Times, NULLs and strings bound as QuerySet.update binds them, the selection's UUID
    too (a hex string on SQLite, a uuid on PostgreSQL); only the rows selected change, and
    the count is theirs. A second shape of values (one now NULL) is compiled for itself."""
    import uuid

    from django.utils import timezone

    from rojos.models import Conversation

    turn, other_turn = uuid.uuid4(), uuid.uuid4()
    mine = _conversation(users, project, turn_id=turn, turn_owner="a")
    theirs = _conversation(users, project, turn_id=other_turn, turn_owner="b")
    claimed = _prepared(
        lambda pk, turn_id: Conversation.objects.filter(pk=pk, turn_id=turn_id), int, uuid.UUID
    )
    now = timezone.now()
    with django_assert_num_queries(1):
        assert claimed.update(mine.pk, turn, turn_id=None, turn_owner="", updated=now) == 1
    assert claimed.update(theirs.pk, turn, turn_id=None, turn_owner="") == 0  # not its turn
    assert claimed.update(mine.pk, turn, turn_id=None) == 0  # no longer claimed
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert (mine.turn_id, mine.turn_owner, mine.updated) == (None, "", now)
    assert (theirs.turn_id, theirs.turn_owner) == (other_turn, "b")
    again = uuid.uuid4()
    assert claimed.update(theirs.pk, other_turn, turn_id=again, turn_owner="c") == 1
    theirs.refresh_from_db()
    assert (theirs.turn_id, theirs.turn_owner) == (again, "c")


def test_an_update_with_an_expression_or_a_model_goes_through_the_orm(users, project):
    from django.db.models import F

    from rojos.models import Conversation

    made = _conversation(users, project, branch=1)
    rows = _prepared(lambda pk: Conversation.objects.filter(pk=pk), int)
    assert rows.update(made.pk, branch=F("branch") + 1) == 1
    other = make_rojo("http://127.0.0.1:9/v1", slug="other")
    assert rows.update(made.pk, rojo=other) == 1
    made.refresh_from_db()
    assert (made.branch, made.rojo_id) == (2, other.pk)


def test_a_delete_removes_only_the_rows_selected(users, project, django_assert_num_queries):
    from django.utils import timezone

    from rojos.models import PendingApproval

    mine, other = _conversation(users, project), _conversation(users, project)
    for number, conversation in enumerate((mine, mine, other)):
        PendingApproval.objects.create(
            project=project,
            conversation=conversation,
            user=users["editor"],
            call_id=f"call-{number}",
            tool="write_file",
            expires=timezone.now(),
        )
    pending = _prepared(
        lambda conversation_id: PendingApproval.objects.filter(conversation_id=conversation_id),
        int,
    )
    with django_assert_num_queries(1):
        assert pending.delete(mine.pk) == 2
    assert pending.delete(mine.pk) == 0
    assert list(PendingApproval.objects.values_list("conversation_id", flat=True)) == [other.pk]


def test_a_delete_that_cascades_or_is_watched_goes_through_the_orm(users, project):
    """Django's collector then deletes what depends on the rows and sends the signals."""
    from django.db.models.signals import post_delete

    from rojos.models import Conversation, Message

    made = _conversation(users, project)
    Message.objects.create(conversation=made, position=0, role="user", content="hi")
    deleted = []

    def seen(sender, instance, **kwargs):
        deleted.append(instance.pk)

    post_delete.connect(seen, sender=Conversation)
    try:
        rows = _prepared(lambda pk: Conversation.objects.filter(pk=pk), int)
        assert rows.delete(made.pk) == 2  # the conversation and its message
    finally:
        post_delete.disconnect(seen, sender=Conversation)
    assert deleted == [made.pk]
    assert not Message.objects.filter(conversation_id=made.pk).exists()


def test_an_update_refuses_what_it_cannot_run_as_the_orm_would(users, project):
    from rojos.models import Conversation

    made = _conversation(users, project)
    sliced = _prepared(lambda pk: Conversation.objects.filter(pk=pk)[:1], int)
    with pytest.raises(ValueError, match="sliced"):
        sliced.update(made.pk, title="x")
    joined = _prepared(lambda slug: Conversation.objects.filter(project__slug=slug), str)
    with pytest.raises(ValueError, match="join"):
        joined.update(project.slug, title="x")
    assert Conversation.objects.get(pk=made.pk).title == "t"
