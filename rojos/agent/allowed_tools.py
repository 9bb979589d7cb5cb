"""Tools a person allowed for the rest of a conversation: their calls no longer ask first.

The choice is stored on the conversation (`Conversation.allowed_tools`), so it holds on every
server process and for the conversation's later turns; the approval gate
(`ApprovalGate._allowed`, rojos/agent/approval_gate.py) reads it before each call that would ask.
"""

from asgiref.sync import sync_to_async
from django.db import transaction

from rojos.agent.branches import branch_messages
from rojos.models import Conversation, Message


async def call_tool_name(*, conversation: Conversation, call_id: str) -> str | None:
    """The tool of a call of the last assistant message of the conversation's active branch."""
    path = branch_messages(conversation)
    last = await path.filter(role=Message.Role.ASSISTANT).order_by("-position").afirst()
    for call in (last.tool_calls if last else None) or ():
        if call.get("id") == call_id:
            return (call.get("function") or {}).get("name") or None
    return None


def _allow_blocking(conversation_id: int, tool: str) -> None:
    with transaction.atomic():
        row = Conversation.objects.select_for_update().only("allowed_tools").get(pk=conversation_id)
        allowed = list(row.allowed_tools or ())
        if tool not in allowed:
            Conversation.objects.filter(pk=conversation_id).update(allowed_tools=[*allowed, tool])


async def conversation_tool_allow(*, conversation: Conversation, call_id: str) -> None:
    """Allow the tool of waiting call `call_id` for the rest of the conversation."""
    tool = await call_tool_name(conversation=conversation, call_id=call_id)
    if tool is not None:
        await sync_to_async(_allow_blocking)(conversation.pk, tool)
