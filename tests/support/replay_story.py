"""A three-turn conversation made through the real loop, for replay, export and admin tests.

Turn 1: text, then two parallel tool calls (create_directory, write_text_content), then a reply.
Turn 2: a tool error (reading a file that does not exist), then a reply.
Turn 3: a provider error (HTTP 500, no retries).
"""

import io
import json
from dataclasses import dataclass

import pytest
from django.core.management import call_command

from rojos.models import Conversation, Message, Rojo
from tests.support.fake_provider import http_error, stream, text_chunks, tool_call_chunks
from tests.support.helpers import PAGE, make_rojo

MESSAGES = (
    "Set up docs/intro with an index page.",
    "Show me notes.txt",
    "Now add a changelog.",
)
TEXT_BEFORE = "I will create the folder and the page."
REPLY_1 = "Done: docs/intro/index.page is written."
REPLY_2 = "There is no notes.txt yet."
CREATE_ARGS = {"path": "docs/intro"}
WRITE_ARGS = {"path": "docs/intro/index.page", "text": PAGE}
READ_ARGS = {"path": "notes.txt"}


def turn_1_replies(write_args: dict = WRITE_ARGS) -> list:
    return [
        stream(
            *tool_call_chunks(
                [("create_directory", CREATE_ARGS), ("write_text_content", write_args)],
                text_before=TEXT_BEFORE,
            )
        ),
        stream(*text_chunks(REPLY_1, pieces=3)),
    ]


def turn_2_replies(read_args: dict = READ_ARGS) -> list:
    return [
        stream(*tool_call_chunks([("get_text_content", read_args)])),
        stream(*text_chunks(REPLY_2)),
    ]


@dataclass
class Story:
    conversation: Conversation
    rojo: Rojo
    # What `chat --format ndjson` printed for each turn, one parsed dict per line.
    live: list[list[dict]]

    def messages(self) -> list[Message]:
        return list(Message.objects.filter(conversation=self.conversation).order_by("position"))

    def users(self) -> list[Message]:
        return [m for m in self.messages() if m.role == Message.Role.USER]


def chat_ndjson(message: str, conversation: int | None) -> list[dict]:
    out = io.StringIO()
    options = {"conversation": conversation} if conversation else {}
    try:
        call_command(
            "chat",
            message,
            project="demo-project",
            rojo="test-rojo",
            user="editor",
            format="ndjson",
            stdout=out,
            **options,
        )
    except SystemExit as exit_:
        assert exit_.code == 1  # the chat command's status for a turn that ended in an error
    return [json.loads(line) for line in out.getvalue().splitlines()]


def merged_chat(events: list[dict]) -> list[dict]:
    """Live events with consecutive CHAT deltas joined, as a stored message holds the text."""
    merged: list[dict] = []
    for event in events:
        if event["type"] == "CHAT" and merged and merged[-1]["type"] == "CHAT":
            merged[-1] = {"type": "CHAT", "text": merged[-1]["text"] + event["text"]}
        else:
            merged.append(dict(event))
    return merged


@pytest.fixture
def story(project, fake_provider, settings) -> Story:
    """The three-turn conversation, made by the `chat` command against the fake provider."""
    settings.ROJO_PROVIDER_RETRIES = 0
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(*turn_1_replies(), *turn_2_replies(), http_error(500))
    live = [chat_ndjson(MESSAGES[0], None)]
    conversation = Conversation.objects.get()
    live += [chat_ndjson(text, conversation.pk) for text in MESSAGES[1:]]
    fake_provider.reset()
    conversation.refresh_from_db()
    return Story(conversation=conversation, rojo=rojo, live=live)
