"""Small builders shared by the chat tests."""

from rojos.models import Message, Rojo

STORY = (
    "Create a directory at docs/intro and write an index.page file there with a page header "
    "and a short intro paragraph."
)
PAGE = "# Introduction\n\nWelcome to the project. This page introduces what it is about.\n"


def make_rojo(base_url: str, **fields) -> Rojo:
    defaults = {
        "name": "Test rojo",
        "slug": "test-rojo",
        "base_url": base_url,
        "model": "fake-model",
        "api_key": "sk-test-secret-key-123",
    }
    return Rojo.objects.create(**{**defaults, **fields})


def stored_history(conversation_id: int) -> list[Message]:
    return list(Message.objects.filter(conversation_id=conversation_id).order_by("position"))


def assert_history_valid(messages: list[Message]) -> None:
    """Every assistant message with tool calls is followed by one tool message per call id."""
    i = 0
    while i < len(messages):
        message = messages[i]
        if message.role == "assistant" and message.tool_calls:
            ids = [call["id"] for call in message.tool_calls]
            answers = [m.tool_call_id for m in messages[i + 1 : i + 1 + len(ids)]]
            roles = {m.role for m in messages[i + 1 : i + 1 + len(ids)]}
            assert roles == {"tool"} and sorted(answers) == sorted(ids), (
                f"calls {ids} at position {message.position} answered by {answers}"
            )
            i += len(ids)
        elif message.role == "tool":
            raise AssertionError(f"tool message at position {message.position} answers nothing")
        i += 1
    assert [m.position for m in messages] == list(range(len(messages)))
