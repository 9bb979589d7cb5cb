"""Hot inserts compiled once and run with each row's values (roject/server/prepared_inserts.py):
the row stored and the object made as Model.objects.create stores and makes them, on SQLite
and on PostgreSQL, one INSERT a row; what Django would insert differently goes through save()."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Value
from django.db.models.signals import pre_save
from django.db.models.sql.compiler import SQLInsertCompiler
from django.test.utils import CaptureQueriesContext

from roject.models import Project
from roject.server.prepared_inserts import PreparedInsert
from rojos.models import Conversation, Message, TurnRecord
from tests.support.helpers import make_rojo

pytestmark = pytest.mark.django_db


def _fields(made) -> dict:
    return {field.attname: getattr(made, field.attname) for field in made._meta.concrete_fields}


@pytest.fixture
def conversation():
    user = get_user_model().objects.create_user(username="ada", password="pw-123456")
    project = Project.objects.create(name="Ada's", slug="adas")
    rojo = make_rojo("http://127.0.0.1:9/v1")
    return Conversation.objects.create(project=project, rojo=rojo, user=user)


def test_rows_are_stored_and_read_back_as_the_orms_create_stores_them(conversation):
    """Every field as the ORM binds it (JSON, times set by auto_now, foreign keys), the new
    key read back, the object saved; the second row of a model runs the compiled INSERT."""
    insert = PreparedInsert(Message)
    for position in (0, 1):
        with CaptureQueriesContext(connection) as queries:
            made = insert.create(
                conversation=conversation,
                position=position,
                role=Message.Role.USER,
                content="Grüße",
                extra={"attachments": [{"path": "a.txt"}]},
            )
        assert len(queries) == 1 and queries[0]["sql"].startswith("INSERT INTO")
        assert made.pk is not None and made.created is not None
        assert not made._state.adding and made._state.db == "default"
        assert _fields(made) == _fields(Message.objects.get(pk=made.pk))
    record = PreparedInsert(TurnRecord).create(
        conversation=conversation, user_message=made, rojo=conversation.rojo, user=conversation.user
    )
    assert _fields(record) == _fields(TurnRecord.objects.get(pk=record.pk))


def test_a_row_made_beforehand_is_stored_as_its_save_stores_it(conversation):
    """A response's usage is made on the event loop and stored on a database thread: the
    same object comes back with its key; a row of another model is refused."""
    from decimal import Decimal

    from rojos.models import UsageRecord

    insert = PreparedInsert(UsageRecord)
    for tokens in (10, 20):
        row = UsageRecord(
            user=conversation.user,
            project_id=conversation.project_id,
            rojo=conversation.rojo,
            conversation=conversation,
            model="m",
            prompt_tokens=tokens,
            completion_tokens=3,
            cost=Decimal("0.0012"),
        )
        assert insert.insert(row) is row and row.pk is not None and not row._state.adding
        assert _fields(row) == _fields(UsageRecord.objects.get(pk=row.pk))
    with pytest.raises(TypeError, match="no other model"):
        insert.insert(Message(conversation=conversation, position=9, role="user"))


def test_a_change_record_is_stored_by_its_models_prepared_insert(conversation):
    """A call's change record, stored with its result by a caller that does not know its
    model: one INSERT, the row as save() stores it (JSON lists, the time auto_now_add sets)."""
    from roject.server.prepared_inserts import prepared_insert
    from rojos.models import FileChange

    for number in (1, 2):
        change = FileChange(
            project_id=conversation.project_id,
            conversation=conversation,
            tool_call_id=f"call-{number}",
            tool="write_text_content",
            paths=["notes.md"],
            before=[False],
            after=["digest"],
            created_parents=[],
            key=f"key-{number}",
        )
        with CaptureQueriesContext(connection) as queries:
            assert prepared_insert(change) is change
        assert len(queries) == 1 and queries[0]["sql"].startswith("INSERT INTO")
        assert change.pk is not None and change.created is not None
        assert _fields(change) == _fields(FileChange.objects.get(pk=change.pk))


def test_a_model_with_pre_save_receivers_goes_through_save_and_they_are_sent(conversation):
    sent = []

    def receiver(sender, instance, **kwargs):
        sent.append(instance.content)

    pre_save.connect(receiver, sender=Message)
    try:
        made = PreparedInsert(Message).create(
            conversation=conversation, position=0, role=Message.Role.USER, content="hi"
        )
    finally:
        pre_save.disconnect(receiver, sender=Message)
    assert sent == ["hi"]
    assert Message.objects.get(pk=made.pk).content == "hi"


def test_an_expression_as_a_value_goes_through_save(conversation):
    """Django compiles an expression into its statement: it is no value to bind."""
    insert = PreparedInsert(Message)
    insert.create(conversation=conversation, position=0, role=Message.Role.USER, content="x")

    made = insert.create(
        conversation=conversation, position=Value(3), role=Message.Role.USER, content="y"
    )

    assert Message.objects.get(pk=made.pk).position == 3


def test_a_model_whose_values_django_binds_otherwise_is_refused_at_its_first_row(
    conversation, monkeypatch
):
    """The check at the first row: values computed here that differ from the parameters
    Django compiled are an error, not a row stored differently."""
    prepare_value = SQLInsertCompiler.prepare_value

    def changed(self, field, value):
        value = prepare_value(self, field, value)
        return value + "!" if field.name == "content" else value

    monkeypatch.setattr(SQLInsertCompiler, "prepare_value", changed)

    with pytest.raises(ValueError, match="binds other values"):
        PreparedInsert(Message).create(
            conversation=conversation, position=0, role=Message.Role.USER, content="z"
        )
    assert not Message.objects.filter(conversation=conversation).exists()
