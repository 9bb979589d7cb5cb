"""The chat's and a re-attach's response: the turn's events as server-sent events (or NDJSON
lines), each batch due together in one write, written by the turn's own task where the
server lets it (roject/server/direct_writes.py)."""

from django.http import HttpRequest

from roject.server.direct_writes import DirectStream, write_ready_of
from rojos.turns.log import Turn
from rojos.web.wire import encoder_for

__all__ = ["event_stream", "events_alone", "events_listed"]

# A batch of events is written in pieces of about this size at most, so that a client that
# does not read still holds no more than the server's buffer (roject/server/write_timeout.py).
WRITE_MAX = 64 * 1024


def event_stream(request: HttpRequest, batches=None, *, turn: Turn | None = None) -> DirectStream:
    """The response streaming `batches` (lists of events), or the `turn` followed from its
    start: each list in one write (up to WRITE_MAX), so the events due together cost one trip
    through Django's and the server's send. What the turn publishes while its follower has
    all is written by the turn's own task, where the server lets it (DirectStream)."""
    content_type, encode = encoder_for(request.headers.get("Accept", ""))

    async def body():
        # The stream holds no database connection: the database threads keep theirs.
        _request_released(request)
        writer = response.writer
        events = batches

        def direct(batch) -> bool:  # in the turn's task: the batch in one write, or False
            if len(batch) == 1:
                return writer.write(encode(batch[0]))
            data = b"".join([encode(event) for event in batch])
            return len(data) <= WRITE_MAX and writer.write(data)

        if turn is not None:
            events = turn.follow_batches(direct=direct if writer else None)
        async for batch in events:
            if writer is not None:
                await writer.settled()  # a direct write that had to wait goes out first
            if len(batch) == 1:
                yield encode(batch[0])
                continue
            pieces, size = [], 0
            for event in batch:
                pieces.append(data := encode(event))
                size += len(data)
                if size >= WRITE_MAX:
                    yield b"".join(pieces)
                    pieces, size = [], 0
            if pieces:
                yield b"".join(pieces)
        if writer is not None:
            await writer.settled()

    response = DirectStream(body(), content_type=content_type, write_ready=write_ready_of(request))
    response["Cache-Control"] = "no-cache, no-transform"
    response["X-Accel-Buffering"] = "no"
    return response


# What a request keeps while its response streams: what identifies it, and its body and
# uploaded files, which Django's handler closes (ASGIRequest.close) once the response ends.
_KEPT = frozenset({"scope", "method", "path", "path_info", "script_name", "_files", "_stream"})


def _request_released(request: HttpRequest) -> None:
    """Let go of what the request carries (its headers twice over, the session, the user, the
    URL's match, the cookies, the body) once its response's body is being sent: every
    middleware's response hook has run by then, and nothing reads them again, yet Django's
    handler holds the request until the response ends, which for a chat is the whole reply
    (about 14 KiB of each stream, `python -m bench.stream_memory`)."""
    state = vars(request)
    for name in [name for name in state if name not in _KEPT]:
        del state[name]


async def events_listed(events):
    """Events known at once (stored, or the end of an interrupted turn): one batch."""
    events = list(events)
    if events:
        yield events


async def events_alone(events):
    """Events as another process relays them: each a batch of its own."""
    async for event in events:
        yield [event]
