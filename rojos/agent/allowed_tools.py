"""Tools a person allowed for the rest of a conversation: their calls no longer ask first.

The choice is stored on the conversation (`Conversation.allowed_tools`), so it holds on every
server process and for the conversation's later turns; the approval gate
(`ApprovalGate._allowed`, rojos/agent/approval_gate.py) reads it before each call that would
ask. The turn that received the decision stores it, before the call goes on
(`ApprovalGate.ask`): a decision that reached no waiting call allows nothing.
"""

from asgiref.sync import sync_to_async
from django.db import transaction

from rojos.models import Conversation


def _allow_blocking(conversation_id: int, tool: str) -> None:
    with transaction.atomic():
        row = Conversation.objects.select_for_update().only("allowed_tools").get(pk=conversation_id)
        allowed = list(row.allowed_tools or ())
        if tool not in allowed:
            Conversation.objects.filter(pk=conversation_id).update(allowed_tools=[*allowed, tool])


async def conversation_tool_allow(*, conversation: Conversation, tool: str) -> None:
    """Allow `tool` for the rest of the conversation."""
    await sync_to_async(_allow_blocking)(conversation.pk, tool)
