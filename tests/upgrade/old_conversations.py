"""The old install's conversations, written through the previous release's models (`apps`):
a chat with a tool call, its file change, a summary and usage; an edited first message (a
branch); a reply a crash cut off."""

import uuid
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.utils import timezone


def _messages(apps, conversation, rows: list[dict]) -> list:
    Message = apps.get_model("rojos", "Message")
    return [
        Message.objects.create(conversation=conversation, position=position, **row)
        for position, row in enumerate(rows)
    ]


_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {
        "name": "write_text_content",
        "arguments": '{"path": "otters.md", "content": "# Otters\\n\\nSeven.\\n"}',
    },
}


def old_chat_fill(apps, project, rojo, editor):
    """Two turns: a file written by a tool call, then a summary of the first turn."""
    conversation = apps.get_model("rojos", "Conversation").objects.create(
        project=project,
        rojo=rojo,
        user=editor,
        title="Otters in the river",
        pinned=True,
        allowed_tools=["write_text_content"],
    )
    usage = {"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940}
    messages = _messages(
        apps,
        conversation,
        [
            {"role": "user", "content": "How many otters live in the river?"},
            {"role": "assistant", "content": None, "tool_calls": [_CALL], "usage": usage},
            {
                "role": "tool",
                "content": '{"path": "otters.md", "bytes": 18}',
                "tool_call_id": "call_1",
                "name": "write_text_content",
            },
            {"role": "assistant", "content": "Seven otters, noted in otters.md.", "usage": usage},
            {"role": "user", "content": "And the beavers upstream?"},
            {
                "role": "summary",
                "content": "The editor counted seven otters and noted them in otters.md.",
                "extra": {"until": 4, "summarised": 4, "from": 0},
            },
            {"role": "assistant", "content": "No beaver was counted upstream.", "usage": usage},
        ],
    )
    TurnRecord = apps.get_model("rojos", "TurnRecord")
    for user_message in (messages[0], messages[4]):
        TurnRecord.objects.create(
            conversation=conversation,
            user_message=user_message,
            rojo=rojo,
            user=editor,
            status="done",
            finished=timezone.now(),
        )
    _usage(apps, project, rojo, editor, conversation, messages)
    return conversation, _changes(apps, project, conversation, messages[1])


def _usage(apps, project, rojo, user, conversation, messages) -> None:
    UsageRecord = apps.get_model("rojos", "UsageRecord")
    for message, kind, prompt, completion, cost in (
        (messages[1], "reply", 900, 40, "0.00042400"),
        (messages[3], "reply", 960, 12, "0.00040320"),
        (messages[5], "summary", 700, 30, "0.00032800"),
        (messages[6], "reply", 400, 9, "0.00017440"),
    ):
        UsageRecord.objects.create(
            user=user,
            project=project,
            rojo=rojo,
            conversation=conversation,
            message=message,
            kind=kind,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cached_tokens=100,
            reported=kind == "reply",
            cost=Decimal(cost),
        )


def _changes(apps, project, conversation, call_message) -> dict[str, int]:
    """A rojo's change (no author: older rows are the conversation user's), a person's
    upload, and a change a crash cut off before its record was finished."""
    FileChange = apps.get_model("rojos", "FileChange")
    User = apps.get_model(settings.AUTH_USER_MODEL)
    rojo = FileChange.objects.create(
        project=project,
        conversation=conversation,
        message=call_message,
        tool_call_id="call_1",
        origin="rojo",
        tool="write_text_content",
        paths=["otters.md"],
        before=[False],
        after=["sha256:otters-v1"],
        diffs=["--- a/otters.md\n+++ b/otters.md\n@@ -0,0 +1,3 @@\n+# Otters\n+\n+Seven.\n"],
        key="change-rojo",
    )
    upload = FileChange.objects.create(
        project=project,
        author=User.objects.get(username="owner"),
        origin="upload",
        tool="upload",
        paths=["map.png"],
        before=[False],
        after=["sha256:map"],
        key="change-upload",
    )
    unfinished = FileChange.objects.create(
        project=project,
        author=User.objects.get(username="editor"),
        origin="person",
        tool="write_text_content",
        paths=["otters.md"],
        before=[True],
        after=None,
        key="change-unfinished",
    )
    return {"rojo": rojo.pk, "upload": upload.pk, "unfinished": unfinished.pk}


def old_fork_fill(apps, project, rojo, owner):
    """The first message edited: branch 1 is active, branch 0 keeps the original."""
    conversation = apps.get_model("rojos", "Conversation").objects.create(
        project=project, rojo=rojo, user=owner, title="Beavers"
    )
    original = _messages(
        apps,
        conversation,
        [
            {"role": "user", "content": "Tell me about beavers"},
            {"role": "assistant", "content": "Beavers build dams."},
        ],
    )
    Message = apps.get_model("rojos", "Message")
    edited = Message.objects.create(
        conversation=conversation,
        branch=1,
        position=0,
        role="user",
        content="Tell me about badgers",
    )
    Message.objects.create(
        conversation=conversation,
        branch=1,
        position=1,
        role="assistant",
        content="Badgers dig setts.",
    )
    conversation.branch = 1
    conversation.branches = [
        {
            "id": 1,
            "parent": 0,
            "at": 0,
            "after": None,
            "first": edited.pk,
            "replaced": original[0].pk,
        }
    ]
    conversation.save(update_fields=["branch", "branches"])
    return conversation


def old_crash_fill(apps, project, rojo, editor):
    """A reply cut off by a crash of its server: the claim left behind (its heartbeat long
    stale), the turn still recorded as running, the text so far a draft."""
    conversation = apps.get_model("rojos", "Conversation").objects.create(
        project=project,
        rojo=rojo,
        user=editor,
        title="A long poem",
        turn_id=uuid.uuid4(),
        turn_heartbeat=timezone.now() - timedelta(days=1),
    )
    question, draft = _messages(
        apps,
        conversation,
        [
            {"role": "user", "content": "Write a long poem about herons"},
            {"role": "assistant", "content": "Grey herons stand in shallow water", "draft": True},
        ],
    )
    apps.get_model("rojos", "TurnRecord").objects.create(
        conversation=conversation, user_message=question, rojo=rojo, user=editor, status="running"
    )
    return conversation, draft
