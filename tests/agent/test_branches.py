"""Edit, regenerate and retry fork a conversation; the model only ever sees the active branch."""

import threading

import pytest

from rojos.models import Conversation, Message, TurnRecord
from tests.support.fake_provider import Gate, http_error, stream, text_chunks
from tests.support.helpers import (
    assert_history_valid,
    make_rojo,
    run,
    start_with_what_it_read,
)
from tests.support.live_server import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def rojo(fake_provider, settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    return make_rojo(fake_provider.base_url)


def reply(text: str):
    return stream(*text_chunks(text, pieces=2))


def sent(request: dict) -> list[tuple[str, str]]:
    """What a request to the provider carried: (role, text) of each message but the system's."""
    return [
        (m["role"], m.get("content") or "") for m in request["messages"] if m["role"] != "system"
    ]


def chat(client, project, rojo, message: str, **extra) -> int:
    events = client.chat(project.pk, rojo=rojo.pk, message=message, **extra)
    assert events[-1].type == "DONE"
    return events[0].data["conversation"]


def detail(client, conversation_id: int) -> dict:
    response = client.get(f"/api/conversations/{conversation_id}")
    assert response.status_code == 200
    return response.json()


def user_message(conversation_id: int, text: str) -> Message:
    return Message.objects.get(conversation_id=conversation_id, role="user", content=text)


def test_an_edit_forks_and_the_model_gets_only_the_active_branch(
    client_for, users, project, rojo, fake_provider
):
    """Editing the second message sends the first turn and the new text, never the old
    second turn; the old branch is kept, and switching back continues it."""
    client = client_for(users["editor"])
    fake_provider.add(reply("Answer one."), reply("Answer two."), reply("Answer two, edited."))
    conversation = chat(client, project, rojo, "First question")
    chat(client, project, rojo, "Second question", conversation=conversation)
    old = user_message(conversation, "Second question")

    chat(client, project, rojo, "Second, edited", conversation=conversation, replace=old.pk)

    assert sent(fake_provider.requests[-1]) == [
        ("user", "First question"),
        ("assistant", "Answer one."),
        ("user", "Second, edited"),
    ]
    shown = detail(client, conversation)
    assert [m["content"] for m in shown["messages"]] == [
        "First question",
        "Answer one.",
        "Second, edited",
        "Answer two, edited.",
    ]
    new = user_message(conversation, "Second, edited")
    assert shown["choices"] == {str(new.pk): [old.pk, new.pk]}
    assert Message.objects.filter(conversation=conversation).count() == 6  # both kept

    outsider = client_for(users["outsider"])
    hidden = outsider.post(f"/api/conversations/{conversation}/branch", json={"message": old.pk})
    assert hidden.status_code == 404
    assert outsider.get("/api/search", params={"q": "question"}).json() == []
    assert client.get("/api/search", params={"q": "question"}).json() != []
    switched = client.post(f"/api/conversations/{conversation}/branch", json={"message": old.pk})
    assert switched.status_code == 200 and switched.json() == {"branch": 0}
    fake_provider.add(reply("Answer three."))
    chat(client, project, rojo, "Third question", conversation=conversation)
    assert sent(fake_provider.requests[-1]) == [
        ("user", "First question"),
        ("assistant", "Answer one."),
        ("user", "Second question"),
        ("assistant", "Answer two."),
        ("user", "Third question"),
    ]
    shown = detail(client, conversation)
    assert shown["choices"] == {str(old.pk): [old.pk, new.pk]}
    assert_history_valid([Message.objects.get(pk=m["id"]) for m in shown["messages"]])


def test_retry_after_a_provider_error_regenerates_in_a_new_branch(
    client_for, users, project, rojo, fake_provider
):
    """A turn that failed is retried with the same text: the retry's branch is shown, the
    failed attempt stays as choice 1 of 2, and the model saw the question once."""
    client = client_for(users["editor"])
    fake_provider.add(http_error(500))
    events = client.chat(project.pk, rojo=rojo.pk, message="Make a plan")
    assert [e.type for e in events][-2:] == ["ERROR", "DONE"]
    conversation = events[0].data["conversation"]
    failed = user_message(conversation, "Make a plan")

    fake_provider.add(reply("Here is the plan."))
    chat(client, project, rojo, "Make a plan", conversation=conversation, replace=failed.pk)

    assert sent(fake_provider.requests[-1]) == [("user", "Make a plan")]
    shown = detail(client, conversation)
    assert [m["content"] for m in shown["messages"]] == ["Make a plan", "Here is the plan."]
    retried = shown["messages"][0]["id"]
    assert shown["choices"] == {str(retried): [failed.pk, retried]}
    assert [t["status"] for t in shown["turns"]] == ["error", "done"]


def test_regenerating_a_regenerated_reply_makes_a_third_choice(
    client_for, users, project, rojo, fake_provider
):
    """Each regenerate of the same question adds one choice, `< 3/3 >`, and switching to
    the first shows its own reply."""
    client = client_for(users["editor"])
    fake_provider.add(reply("One."), reply("Two."), reply("Three."))
    conversation = chat(client, project, rojo, "Pick a number")
    first = user_message(conversation, "Pick a number")
    chat(client, project, rojo, "Pick a number", conversation=conversation, replace=first.pk)
    second = detail(client, conversation)["messages"][0]["id"]
    chat(client, project, rojo, "Pick a number", conversation=conversation, replace=second)
    shown = detail(client, conversation)
    third = shown["messages"][0]["id"]
    assert shown["choices"] == {str(third): [first.pk, second, third]}
    assert shown["messages"][1]["content"] == "Three."

    client.post(f"/api/conversations/{conversation}/branch", json={"message": first.pk})
    assert detail(client, conversation)["messages"][1]["content"] == "One."


def test_a_fork_read_before_another_fork_and_a_switch_back_takes_the_next_number(
    client_for, users, project, rojo, fake_provider
):
    """Tab A regenerates the first answer with the conversation as it read it; meanwhile
    tab B edited the second question (branch 1) and switched back. A's start (the blocking
    service the chat calls) makes branch 2, and B's branch keeps its entry and its path."""
    client = client_for(users["editor"])
    fake_provider.add(reply("A1"), reply("A2"), reply("A2 edited"))
    conversation = chat(client, project, rojo, "Q1")
    chat(client, project, rojo, "Q2", conversation=conversation)
    first, second = user_message(conversation, "Q1"), user_message(conversation, "Q2")
    read_by_a = Conversation.objects.get(pk=conversation)
    chat(client, project, rojo, "Q2 edited", conversation=conversation, replace=second.pk)
    back = client.post(f"/api/conversations/{conversation}/branch", json={"message": second.pk})
    assert back.status_code == 200

    begun = start_with_what_it_read(
        read_by_a, project=project, user=users["editor"], rojo=rojo, message="Q1 again",
        replace=first.pk,
    )  # fmt: skip

    stored = Conversation.objects.get(pk=conversation)
    assert stored.branch == 2
    forks = [(b["id"], b["replaced"]) for b in stored.branches]
    assert forks == [(1, second.pk), (2, first.pk)]
    assert [m.content for m in begun.history.messages] == ["Q1 again"]


def test_switching_branches_is_refused_while_a_reply_runs(
    client_for, users, project, rojo, fake_provider
):
    """A turn only appends to the active branch: switching meanwhile answers 409. The reply
    holds half-way until the switch was answered, so the turn surely still runs."""
    client = client_for(users["editor"])
    answered = threading.Event()
    chunks = text_chunks("w " * 40, pieces=40)
    fake_provider.add(reply("One."), stream(*chunks[:20], Gate(answered), *chunks[20:], delay=0.05))
    conversation = chat(client, project, rojo, "Question")
    first = user_message(conversation, "Question")
    with client.chat_stream(
        project.pk, rojo=rojo.pk, message="Again", conversation=conversation, replace=first.pk
    ) as running:
        wait_until(lambda: Conversation.objects.running().filter(pk=conversation).exists())
        refused = client.post(
            f"/api/conversations/{conversation}/branch", json={"message": first.pk}
        )
        answered.set()
        assert refused.status_code == 409
        running.read()
    assert Conversation.objects.get(pk=conversation).branch == 1


def test_an_edit_of_a_message_off_the_active_branch_is_404_and_stores_nothing(
    client_for, users, project, rojo, fake_provider
):
    """Only a user message of the active branch can be replaced; the claim is given up."""
    client = client_for(users["editor"])
    fake_provider.add(reply("One."), reply("Two."))
    conversation = chat(client, project, rojo, "Question")
    first = user_message(conversation, "Question")
    chat(client, project, rojo, "Other", conversation=conversation, replace=first.pk)
    response = client.post(
        f"/api/projects/{project.pk}/chat",
        json={"rojo": rojo.pk, "message": "x", "conversation": conversation, "replace": first.pk},
    )
    assert response.status_code == 404
    assert Message.objects.filter(conversation=conversation).count() == 4
    assert not Conversation.objects.get(pk=conversation).turn_id
    assert TurnRecord.objects.filter(conversation=conversation).count() == 2


def test_export_replay_and_the_admin_show_every_branch(
    client_for, admin_client, users, project, rojo, fake_provider
):
    """JSON holds both branches' messages with their branch and the active path; Markdown
    shows the active branch then the other; replay prints either; the admin says which."""
    client = client_for(users["editor"])
    fake_provider.add(reply("Old answer."), reply("New answer."))
    conversation = chat(client, project, rojo, "Old question")
    old = user_message(conversation, "Old question")
    chat(client, project, rojo, "New question", conversation=conversation, replace=old.pk)
    url = f"/api/conversations/{conversation}/export"

    data = client.get(url, params={"format": "json"}).json()
    assert [(m["branch"], m["content"]) for m in data["messages"]] == [
        (0, "Old question"),
        (0, "Old answer."),
        (1, "New question"),
        (1, "New answer."),
    ]
    assert data["conversation"]["branch"] == 1
    assert data["branch_path"] == [m["id"] for m in data["messages"][2:]]

    markdown = client.get(url, params={"format": "markdown"}).text
    assert markdown.index("New answer.") < markdown.index("# Branch 1 of 2")
    assert markdown.index("# Branch 1 of 2") < markdown.index("Old answer.")

    assert "New answer." in run("replay_conversation", str(conversation))
    replayed_old = run("replay_conversation", str(conversation), "--branch", "1")
    assert "Old answer." in replayed_old and "New answer." not in replayed_old
    assert "branch 1 of 2" in replayed_old

    page = admin_client.get(f"/admin/rojos/conversation/{conversation}/change/").content.decode()
    assert "Branch 2 of 2 is shown." in page
    assert f"Branch 2 replaces message {old.pk} (position 0) of branch 1." in page


def test_a_summary_stays_on_its_branch(client_for, users, project, rojo, fake_provider):
    """A summary stored on one branch is sent by that branch's requests in place of the
    turns it covers; a fork before it sends the turns themselves and no summary."""
    client = client_for(users["editor"])
    conversation = Conversation.objects.create(project=project, rojo=rojo, user=users["editor"])
    texts = [("user", "Q0"), ("assistant", "A0"), ("user", "Q1"), ("assistant", "A1")]
    rows = [
        Message.objects.create(conversation=conversation, position=n, role=role, content=text)
        for n, (role, text) in enumerate(texts)
    ]
    Message.objects.create(
        conversation=conversation,
        position=4,
        role="summary",
        content="SUMMARY OF Q0 AND Q1",
        extra={"until": 4, "summarised": 4, "from": 0},
    )
    fake_provider.add(reply("A2."), reply("A1 again."))

    chat(client, project, rojo, "Q2", conversation=conversation.pk)
    request = fake_provider.requests[-1]
    assert "SUMMARY OF Q0 AND Q1" in request["messages"][0]["content"]
    assert sent(request)[-1] == ("user", "Q2") and ("user", "Q0") not in sent(request)

    chat(client, project, rojo, "Q1, edited", conversation=conversation.pk, replace=rows[2].pk)
    request = fake_provider.requests[-1]
    assert "SUMMARY" not in str(request["messages"])
    assert sent(request) == [("user", "Q0"), ("assistant", "A0"), ("user", "Q1, edited")]


def test_every_branchs_path_reads_as_the_orms_in_one_prepared_query(
    users, project, django_assert_num_queries
):
    """A turn's start and a conversation's page read the active path by a query compiled
    once for each shape of path (branch_messages_list): the same messages, in the same
    order, as the ORM's branch_messages, for branches forked from forks, on SQLite and on
    PostgreSQL (a position is a positive field: a marker Django took for out of its range
    would be compiled away)."""
    from rojos.agent.branches import branch_messages, branch_messages_list

    conversation = Conversation.objects.create(
        project=project, rojo=make_rojo("http://127.0.0.1:9/v1"), user=users["editor"]
    )
    layout = {0: range(0, 6), 1: range(2, 6), 2: range(4, 7), 3: range(1, 3)}
    for branch, positions in layout.items():
        for position in positions:
            Message.objects.create(
                conversation=conversation,
                branch=branch,
                position=position,
                role="user" if position % 2 == 0 else "assistant",
                content=f"{branch}.{position}",
            )
    conversation.branches = [
        {"id": 1, "parent": 0, "at": 2, "after": None, "first": None, "replaced": None},
        {"id": 2, "parent": 1, "at": 4, "after": None, "first": None, "replaced": None},
        {"id": 3, "parent": 0, "at": 1, "after": None, "first": None, "replaced": None},
    ]
    conversation.save(update_fields=["branches"])
    for branch in (0, 1, 2, 3, None):
        expected = [m.content for m in branch_messages(conversation, branch)]
        with django_assert_num_queries(1):
            read = branch_messages_list(conversation, branch)
        assert [m.content for m in read] == expected
    assert [m.content for m in branch_messages_list(conversation, 2)] == [
        "0.0", "0.1", "1.2", "1.3", "2.4", "2.5", "2.6"
    ]  # fmt: skip
    other = Conversation.objects.create(project=project, user=users["editor"])
    assert branch_messages_list(other) == []
