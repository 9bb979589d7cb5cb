"""An MCP call's turn in the database (./calls.py runs it): the checks before it starts,
the token's conversation claimed, the call stored with its turn record, and its end recorded.
"""

import json
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from roject import storage
from roject.identity.tokens import api_token_live
from roject.members.access import project_role
from roject.models import ApiToken, Role
from rojos.agent.history import History
from rojos.turns.claims import turn_claim_blocking, turn_release_blocking
from rojos.turns.limits import turn_limits_check
from rojos.turns.repair import Repair, conversation_repair

from ..errors import TurnLimited
from ..models import Conversation, Message, TurnRecord
from ..tools import RojoToolContext, ToolError, echoed, registry
from ..tools.schema import validate
from .caller import McpCaller
from .listing import served, served_names
from .owner_approval import owner_approval_refusal

# What the turn of a call cancelled before its answer says (the chat's page shows it).
_STOPPED = "The MCP client went away before the call's answer."


def mcp_title(token: ApiToken) -> str:
    return f"via MCP ({token.name})"


class CallRefused(Exception):
    """The call may not start; its message says why, and nothing was stored."""


@dataclass
class BegunCall:
    conversation: Conversation
    history: History
    call: dict
    assistant: Message
    record: TurnRecord
    turn_id: uuid.UUID
    ctx: RojoToolContext
    repair: Repair
    address: str | None


def _refusal(token: ApiToken | None, role: Role | None, name: str) -> str | None:
    """Why the call must not start, if it must not."""
    if token is None:
        return "This API token was revoked or has expired."
    if role is None:
        return "You are not a member of this project."
    tool = registry.get(name)
    if tool is None or not served(tool):
        offered = ", ".join(sorted(served_names(registry)))
        return f"unknown tool {echoed(name)!r}; available tools: {offered}"
    if tool.writes and token.read_only:
        return f"tool {name!r} changes files, and this API token is read-only"
    if tool.writes and not role.can_write:
        return f"tool {name!r} changes files, and your role in this project is read-only"
    return None


def _arguments_refusal(name: str, arguments: dict) -> str | None:
    """Why the arguments must not be stored (over the size limit, or not the tool's
    schema), if they must not: refused before anything is kept, as a tool error."""
    encoded = json.dumps(arguments, ensure_ascii=False)
    limit = settings.ROJO_MCP_MAX_BODY_BYTES
    if len(encoded.encode("utf-8", "surrogatepass")) > limit:
        return f"the arguments of {name!r} are over the limit of {limit:,} bytes"
    tool = registry.get(name)
    if tool is not None and tool.validates_arguments:
        try:
            validate(arguments, tool.parameters)
        except ToolError as exc:
            return str(exc)
    return None


def _conversation(token: ApiToken, project_id: int, turn_id: uuid.UUID):
    """(Blocking, in the call's transaction) The token's MCP conversation in the project,
    claimed for this call, with its history; None while another call holds it."""
    conversation = Conversation.objects.filter(via_token=token, project_id=project_id).first()
    if conversation is None:
        try:
            with transaction.atomic():
                conversation = Conversation.objects.create(
                    project_id=project_id,
                    user=token.user,
                    title=mcp_title(token),
                    via_mcp=True,
                    via_token=token,
                    turn_id=turn_id,
                    turn_heartbeat=timezone.now(),
                )
        except IntegrityError:  # a call in parallel made it first
            return None
        return conversation, History(conversation, []), True
    free = turn_claim_blocking(conversation.pk, turn_id)
    if free is None:
        return None
    # A call never reads the calls before it: their messages stay unread.
    return conversation, History.load_last_turn_blocking(conversation), free


def call_begin_blocking(caller: McpCaller, name: str, arguments: dict) -> BegunCall | None:
    """(Blocking) Check the token and the role, count the user's limits, claim the
    conversation and store the call with its turn record: one transaction. None while
    another call of the conversation runs; CallRefused, with nothing stored, when it may not."""
    token = api_token_live(token_id=caller.token_id)
    role = project_role(user=caller.user_id, project_id=caller.project_id)
    refusal = _refusal(token, role, name) or _arguments_refusal(name, arguments)
    if refusal:
        raise CallRefused(refusal)
    if token.read_only:
        role = Role.VIEWER
    root = storage.project_root_create(caller.project_id)
    if refusal := owner_approval_refusal(
        tool=registry.get(name),
        arguments=arguments,
        role=role,
        project_id=caller.project_id,
        root=root,
    ):
        raise CallRefused(refusal)
    turn_id = uuid.uuid4()
    with transaction.atomic():
        try:
            turn_limits_check(user=token.user)
        except TurnLimited as exc:
            raise CallRefused(str(exc)) from None
        found = _conversation(token, caller.project_id, turn_id)
        if found is None:
            return None
        conversation, history, free = found
        repair = conversation_repair(
            conversation=conversation, history=history, root=root, taken_over=not free
        )
        asked = history.append_blocking(role=Message.Role.USER, content=f"MCP call: {name}")
        call = {
            "id": f"mcp_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
        }
        assistant = history.append_blocking(role=Message.Role.ASSISTANT, tool_calls=[call])
        record = TurnRecord.objects.create(
            conversation=conversation, user_message=asked, user=token.user
        )
    ctx = RojoToolContext(
        project_id=caller.project_id,
        project_root=root,
        user=token.user,
        role=role,
        enabled=served_names(registry),
    )
    return BegunCall(
        conversation, history, call, assistant, record, turn_id, ctx, repair, caller.address
    )


def call_end_blocking(begun: BegunCall, *, stopped: bool = False) -> None:
    """(Blocking) Record the call's turn as done, or `stopped` (its call answered as
    interrupted if it never ran), and give the conversation up."""
    with transaction.atomic():
        ended = {"status": TurnRecord.Status.DONE, "finished": timezone.now()}
        if stopped:
            begun.history.close_open_calls_blocking()
            ended.update(status=TurnRecord.Status.STOPPED, error=_STOPPED, error_code="stopped")
        TurnRecord.objects.filter(pk=begun.record.pk).update(**ended)
        turn_release_blocking(begun.conversation.pk, begun.turn_id)
