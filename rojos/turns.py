"""The turn runner: a turn runs as a server-side task that outlives the request that started it.

Each event is numbered and kept while the turn runs (and a while after), so a client that
loses its connection re-attaches and gets what it missed. One turn at a time per
conversation, claimed in the database so the rule holds across server processes; a stop
request reaches the running turn over the channel layer, whichever process receives it.
"""

import asyncio
import contextlib
import contextvars
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from roject import storage
from roject.access import ProjectAccess
from roject.db_threads import own_thread

from . import undo
from .agent import agent_loop
from .clients import rojo_client
from .errors import TurnBusy, TurnError, TurnLimited, TurnNotStarted
from .history import History
from .models import Conversation, FileChange, Message, Rojo, TurnRecord
from .replay import tool_message_events
from .tool_calls import cut_off_writes_clean
from .tools import RojoToolContext, registry
from .turn_messages import turn_group, turn_listen
from .wire import WireEvent, WireType, wire_payload

logger = logging.getLogger(__name__)

# How long a finished turn's events stay available to re-attaching clients.
KEEP_FINISHED_SECONDS = 120
INTERRUPTED_MESSAGE = (
    "The server stopped while this reply was running; it ends here, "
    "and calls it had not finished are marked interrupted."
)
# The failed turn's record says this; the chat's answer says what is down, when it knows.
_NOT_STARTED = "The reply could not start on the server; see its log."
_CLAIM_LOST = (
    "This reply was stopped: its server could not confirm it was still running for too long, "
    "and the conversation was given to a new message."
)


class Turn:
    """The numbered events of one turn, and a way to follow them as they come."""

    def __init__(self, conversation_id: int) -> None:
        self.conversation_id = conversation_id
        # The events in order (seq is the position + 1): their types, and their data, a CHAT
        # event's as its text alone. Appending strings allocates nothing the garbage
        # collector tracks, so the thousands of chunks a turn keeps neither trigger its
        # passes nor lengthen them. event() gives the WireEvent back.
        self.kinds: list[WireType] = []
        self.data: list[dict | str] = []
        self.finished = False
        self.task: asyncio.Task | None = None
        self.record_id: int | None = None
        self.error: dict = {}
        self.approvals: dict[str, asyncio.Future] = {}
        self.relays: set[asyncio.Task] = set()
        self.auto_approve: bool | None = None
        self.status = TurnRecord.Status.DONE
        self.claim_lost = False
        self._changed = asyncio.Event()

    def publish(self, type_: WireType, data: dict) -> None:
        self.kinds.append(type_)
        self.data.append(data["text"] if type_ == "CHAT" else data)
        self._changed.set()
        self._changed = asyncio.Event()

    def event(self, position: int) -> WireEvent:
        """The event at a position (0-based) of the log."""
        type_, data = self.kinds[position], self.data[position]
        return WireEvent(position + 1, type_, {"text": data} if type_ == "CHAT" else data)

    def fail(self, message: str, code: str, status=TurnRecord.Status.ERROR) -> None:
        """Publish the ERROR event that ends the turn, and remember it for the record."""
        self.status = status
        self.error = {"message": message, "code": code}
        self.publish("ERROR", self.error)

    async def approval(self, call_id: str) -> bool:
        """Wait for a person's decision on a call; no answer in time counts as a denial."""
        if self.auto_approve is not None:
            return self.auto_approve
        waiting = asyncio.get_running_loop().create_future()
        self.approvals[call_id] = waiting
        try:
            return await asyncio.wait_for(waiting, settings.ROJO_APPROVAL_TIMEOUT)
        except TimeoutError:
            return False
        finally:
            self.approvals.pop(call_id, None)

    def finish(self) -> None:
        self.finished = True
        self._changed.set()

    async def changed(self) -> None:
        """Wait for the next event (or the end)."""
        await self._changed.wait()

    async def follow(self, after: int = 0) -> AsyncIterator[WireEvent]:
        """Events numbered above `after`, then each new one until the turn is done.

        An `after` this turn never gave (an id from an earlier turn, kept by a tab that lost
        its connection) starts from the beginning: else the stream would end with nothing,
        not even DONE, and the client would ask again at once.
        """
        position = max(after, 0)
        if position > len(self.kinds):
            position = 0
        while True:
            while position < len(self.kinds):
                yield self.event(position)
                position += 1
            if self.finished:
                return
            await self._changed.wait()


_turns: dict[int, Turn] = {}


def turn_get(conversation_id: int) -> Turn | None:
    """The running or recently finished turn of a conversation in this process."""
    return _turns.get(conversation_id)


def _claim_blocking(conversation_id: int, turn_id: uuid.UUID) -> bool | None:
    """(Blocking) Claim a conversation for a turn: True when it was free, False when this took
    over the claim of a turn that a crash cut off (its heartbeat stopped), None when a turn
    is running. Only a takeover calls for repairs: every turn that ends gives its claim up
    in the transaction that records how it ended."""
    now = timezone.now()
    rows = Conversation.objects.filter(pk=conversation_id)
    if rows.filter(turn_id__isnull=True).update(turn_id=turn_id, turn_heartbeat=now):
        return True
    stale = now - timedelta(seconds=settings.ROJO_TURN_STALE_SECONDS)
    if rows.filter(turn_heartbeat__lt=stale).update(turn_id=turn_id, turn_heartbeat=now):
        return False
    return None


def _release_blocking(conversation_id: int, turn_id: uuid.UUID) -> None:
    Conversation.objects.filter(pk=conversation_id, turn_id=turn_id).update(
        turn_id=None, turn_heartbeat=None, updated=timezone.now()
    )


async def _heartbeat(turn: Turn, turn_id: uuid.UUID, task: asyncio.Task) -> None:
    """Keep the turn's claim fresh while it runs.

    A beat that fails (the database locked or out of reach for a moment) is tried again at
    the next. A claim found taken over (the beats failed for so long that another request
    judged this turn dead) stops the turn: two must never run in one conversation.
    """
    while True:
        await asyncio.sleep(settings.ROJO_TURN_HEARTBEAT_SECONDS)
        try:
            kept = await Conversation.objects.filter(
                pk=turn.conversation_id, turn_id=turn_id
            ).aupdate(turn_heartbeat=timezone.now())
        except DatabaseError:
            logger.warning("heartbeat of conversation %s failed", turn.conversation_id)
            continue
        if not kept:
            turn.claim_lost = True
            task.cancel()
            return


def _title_from(message: str) -> str:
    line = " ".join(message.split())
    return line if len(line) <= 80 else line[:79] + "…"


def turn_limits_check(*, user) -> None:
    """(Blocking) Raise TurnLimited when the user is over a per-user limit: runaway cost.

    Both limits are counted in one query over the user's recent and running turns.
    """
    per_minute = settings.ROJO_USER_MESSAGES_PER_MINUTE
    at_once = settings.ROJO_USER_CONCURRENT_TURNS
    if not per_minute and not at_once:
        return
    recent = Q(started__gte=timezone.now() - timedelta(minutes=1))
    running = Q(status=TurnRecord.Status.RUNNING, conversation__in=Conversation.objects.running())
    counts = TurnRecord.objects.filter(recent | running, user=user).aggregate(
        recent=Count("pk", filter=recent), running=Count("pk", filter=running)
    )
    if per_minute and counts["recent"] >= per_minute:
        raise TurnLimited(
            f"You have sent {per_minute} {'message' if per_minute == 1 else 'messages'} "
            "in the last minute, the most allowed; "
            "wait a moment and send again."
        )
    if at_once and counts["running"] >= at_once:
        raise TurnLimited(
            f"You already have {at_once} {'reply' if at_once == 1 else 'replies'} running, "
            "the most allowed at once; "
            "wait for one to finish or stop it."
        )


async def turn_start(
    *,
    access: ProjectAccess,
    user,
    rojo: Rojo,
    conversation: Conversation | None,
    message: str,
    auto_approve: bool | None = None,
) -> Turn:
    """Claim the conversation (a new one when None), store the user's message and start the
    turn's task.

    Raises TurnBusy, before storing anything, when a turn is already running, and
    TurnNotStarted, after storing the message and recording the turn as failed, when the
    turn cannot start (the channel layer or the database is down). Calls that need
    approval wait for a person unless `auto_approve` decides them all (scripts).

    A client that hangs up meanwhile does not stop the start half-way (a stored message
    and a claim with no turn behind it): a turn outlives its request, so it starts, and the
    cancellation goes on once it has.
    """
    starting = asyncio.ensure_future(
        _turn_start(access, user, rojo, conversation, message, auto_approve)
    )
    try:
        return await asyncio.shield(starting)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await starting
        raise


async def _turn_start(access, user, rojo, conversation, message, auto_approve) -> Turn:
    turn_id = uuid.uuid4()
    begun = await sync_to_async(_begin)(access, conversation, rojo, user, message, turn_id)
    if begun is None:
        raise TurnBusy("A reply is still running in this conversation; wait or stop it first.")
    turn = Turn(begun.conversation.pk)
    turn.record_id = begun.record.pk
    turn.auto_approve = auto_approve
    layer = get_channel_layer()
    channel = None
    try:
        channel = await layer.new_channel()
        await layer.group_add(turn_group(turn.conversation_id), channel)
        if begun.unfinished or begun.history.cut_off:  # the last turn was cut off by a crash

            def recover() -> None:
                undo.cut_off_changes_finish(begun.root, begun.unfinished)
                cut_off_writes_clean(begun.root, begun.history.cut_off, registry)

            await undo.under_changes_lock(access.project.pk, recover)
    except BaseException as exc:
        # Stored, but it cannot run: end it as failed and give the conversation up.
        turn.fail(_NOT_STARTED, "internal")
        with contextlib.suppress(Exception):
            if channel is not None:
                await layer.group_discard(turn_group(turn.conversation_id), channel)
        await sync_to_async(_end)(turn, turn_id)
        if isinstance(exc, Exception):
            raise TurnNotStarted(_NOT_STARTED, turn.conversation_id) from exc
        raise
    ctx = RojoToolContext(
        project_id=access.project.pk,
        project_root=begun.root,
        user=user,
        role=access.role,
        enabled=frozenset(rojo.tools or ()),
    )
    turn.publish("START", {"conversation": turn.conversation_id, "message": begun.message.pk})
    _turns[turn.conversation_id] = turn
    # A fresh context: the task must not inherit the request's thread-sensitive context,
    # which ends with the request (its ORM calls would land on a leaked thread).
    turn.task = asyncio.create_task(
        _run_in_own_thread(
            turn,
            turn_id=turn_id,
            history=begun.history,
            rojo=rojo,
            ctx=ctx,
            layer=layer,
            channel=channel,
        ),
        context=contextvars.Context(),
    )
    return turn


@dataclass
class _Begun:
    root: Path
    conversation: Conversation
    history: History
    message: Message
    record: TurnRecord
    # The conversation's change records a crash left unfinished.
    unfinished: list[FileChange]


def _begin(
    access: ProjectAccess,
    conversation: Conversation | None,
    rojo: Rojo,
    user,
    message: str,
    turn_id: uuid.UUID,
) -> _Begun | None:
    """(Blocking) Claim the conversation, load its history and store the user's message with
    the turn's record: one transaction, so that a message is never stored without the turn
    that answers it, nor a claim left without its record. None when a turn is running.

    A new conversation is made claimed, with nothing to load; a claimed one is repaired
    only after a crash (a takeover, or calls left open). The project's root is made here
    too, on the same thread.
    """
    root = storage.project_root_create(access.project.pk)
    with transaction.atomic():
        if conversation is None:
            conversation = Conversation.objects.create(
                project=access.project,
                rojo=rojo,
                user=user,
                title=_title_from(message),
                turn_id=turn_id,
                turn_heartbeat=timezone.now(),
            )
            history, crashed = History(conversation, []), False
        else:
            free = _claim_blocking(conversation.pk, turn_id)
            if free is None:
                return None
            history = History.load_blocking(conversation)
            crashed = not free or bool(history.cut_off)
        if crashed:
            # A turn still marked running was cut off: its calls were just closed. Its error
            # is what the chat, replay and export show where the turn ended.
            TurnRecord.objects.filter(
                conversation=conversation, status=TurnRecord.Status.RUNNING
            ).update(
                status=TurnRecord.Status.INTERRUPTED,
                error=INTERRUPTED_MESSAGE,
                error_code="interrupted",
                finished=timezone.now(),
            )
        user_message = history.append_blocking(role=Message.Role.USER, content=message)
        record = TurnRecord.objects.create(
            conversation=conversation, user_message=user_message, rojo=rojo, user=user
        )
        if conversation.rojo_id != rojo.pk:
            conversation.rojo = rojo
            conversation.save(update_fields=["rojo"])
        # Change records a crash left unfinished, with its calls (see ToolCallRunner._execute).
        unfinished = (
            list(FileChange.objects.filter(conversation=conversation, after__isnull=True))
            if crashed
            else []
        )
    return _Begun(root, conversation, history, user_message, record, unfinished)


async def _run_in_own_thread(turn: Turn, **kwargs) -> None:
    """Run the turn with its ORM calls on one thread of its own, closed with the turn.

    Its own: a turn whose database call waits (SQLite busy, a lock) holds up no other turn.
    """
    async with own_thread():
        await _run(turn, **kwargs)


async def _run(turn: Turn, *, turn_id, history: History, rojo: Rojo, ctx, layer, channel) -> None:
    conversation_id = turn.conversation_id
    task = asyncio.current_task()
    helpers = [
        asyncio.create_task(turn_listen(layer, channel, turn, task)),
        asyncio.create_task(_heartbeat(turn, turn_id, task)),
    ]
    deadline = asyncio.timeout(settings.ROJO_TURN_MAX_SECONDS)
    try:
        async with (
            deadline,
            contextlib.aclosing(
                agent_loop(
                    history=history,
                    rojo=rojo,
                    ctx=ctx,
                    client=await rojo_client(rojo),
                    approver=turn.approval,
                    record_changes=True,
                )
            ) as events,
        ):
            async for event in events:
                turn.publish(*wire_payload(event))
    except TimeoutError:
        await _publish_interrupted(turn, history)
        if not deadline.expired():  # not the turn's limit: a failure like any other
            logger.exception("turn in conversation %s failed", conversation_id)
            turn.fail("The turn failed on the server; see its log.", "internal")
        else:
            minutes = settings.ROJO_TURN_MAX_SECONDS / 60
            turn.fail(
                f"The reply ran past its limit of {minutes:g} minutes (ROJO_TURN_MAX_SECONDS) "
                "and was stopped; reply to let it go on.",
                "timeout",
            )
    except TurnError as exc:
        await _publish_interrupted(turn, history)
        turn.fail(str(exc), exc.code)
    except asyncio.CancelledError:
        await _publish_interrupted(turn, history)
        if turn.claim_lost:
            turn.fail(_CLAIM_LOST, "internal")
        else:
            turn.fail("Stopped.", "stopped", TurnRecord.Status.STOPPED)
    except Exception:
        logger.exception("turn in conversation %s failed", conversation_id)
        await _publish_interrupted(turn, history)
        turn.fail("The turn failed on the server; see its log.", "internal")
    finally:
        for helper in helpers:
            helper.cancel()
        await _cleanup(turn, turn_id=turn_id, layer=layer, channel=channel)


async def _publish_interrupted(turn: Turn, history: History) -> None:
    """Answer the calls the end of the turn cut short, and tell the browser how they were.

    A stop or failure can land between a call's result being stored and its event being
    sent, before a call ran at all, or while the reply asking for the calls was being
    stored (answered as interrupted here): the stored history decides.
    """
    if not turn.claim_lost:  # else the conversation is another turn's, which answered them
        with contextlib.suppress(Exception):  # the database may be what failed
            await asyncio.shield(history.close_open_calls())
    calls = {}
    sent = list(zip(turn.kinds, turn.data, strict=True))
    results = {data["id"] for kind, data in sent if kind == "TOOL_RESULT"}
    announced = {data["id"] for kind, data in sent if kind == "TOOL_CALL"}
    started = turn.data[0]["message"]
    for message in history.messages:
        if message.pk is not None and message.pk <= started:
            continue
        if message.role == Message.Role.ASSISTANT:
            calls.update({call["id"]: call for call in message.tool_calls or ()})
        elif message.role == Message.Role.TOOL and message.tool_call_id not in results:
            call, outcome = tool_message_events(message, calls.get(message.tool_call_id))
            if message.tool_call_id not in announced:
                turn.publish("TOOL_CALL", call)
            turn.publish("TOOL_RESULT", outcome)


async def _cleanup(turn: Turn, *, turn_id, layer, channel) -> None:
    conversation_id = turn.conversation_id
    try:
        await sync_to_async(_end)(turn, turn_id)
    finally:
        with contextlib.suppress(Exception):  # the relay may be down; the end is recorded
            await layer.group_discard(turn_group(conversation_id), channel)
        turn.publish("DONE", {})
        turn.finish()
        asyncio.get_running_loop().call_later(KEEP_FINISHED_SECONDS, _forget, turn)


def _end(turn: Turn, turn_id: uuid.UUID) -> None:
    """(Blocking) Record how the turn ended and give the conversation up: one transaction."""
    with transaction.atomic():
        TurnRecord.objects.filter(pk=turn.record_id).update(
            status=turn.status,
            error=turn.error.get("message", ""),
            error_code=turn.error.get("code", ""),
            finished=timezone.now(),
        )
        _release_blocking(turn.conversation_id, turn_id)


def _forget(turn: Turn) -> None:
    if _turns.get(turn.conversation_id) is turn:
        del _turns[turn.conversation_id]
