"""A chat request takes its start's place (rojos.turns.admission) as its body is in, before
Django's request path: its session, user, CSRF and access checks then run in their turn too.

Taken in the view, the place came after those: 200 chats sent at once each had their checks
done (and their session and user read on the database threads) before the first admitted one
went on, so every start waited for all the others' checks. Every check still runs, in the
same order, and a request they refuse gives its place back as it is answered.

The place is taken once the request's body is in (UploadSizeGuard, outside, bounds it), so a
client sending it slowly holds none; it is handed to the view in the ASGI scope, and given
back here when the request ends without a turn having taken it.

Only a request signed in with what a member has chatted with on this process (its session
cookie or its bearer token, `chat_signed_in`, until a chat with it is refused as signed in by
no one or no member) takes its place here. Any other, a stranger's
first of all, goes through Django's checks first and takes its place in the view: a flood
sent by no one who may chat never queues ahead of members' starts, nor holds the starts
unsettled for the replies' writes (rojos.turns.admission.starts_settled).
"""

import hashlib
import re
from collections import OrderedDict

from django.conf import settings
from django.http.cookie import parse_cookie

from roject.server.draining import draining
from rojos.turns.admission import StartSlot, start_admit

CHAT_PATH = re.compile(r"/api/projects/[^/]+/chat")
SCOPE_KEY = "rojo.start_slot"
SIGNED_IN_KEPT = 4096  # the credentials remembered, the least recently seen forgotten first

# Digests of the credentials members have chatted with on this process (the event loop's
# thread alone reads and writes it), in the order last seen.
_signed_in: "OrderedDict[bytes, None]" = OrderedDict()


def _credential(scope: dict) -> bytes | None:
    """A digest of what the request signs in with: its bearer token (which Django tries
    alone when it is sent), else its session cookie; None for neither."""
    cookies = []
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            return hashlib.blake2b(b"token " + value, digest_size=16).digest()
        if name == b"cookie":
            cookies.append(value.decode("latin-1"))
    session = parse_cookie("; ".join(cookies)).get(settings.SESSION_COOKIE_NAME)
    if not session:
        return None
    return hashlib.blake2b(b"session " + session.encode(), digest_size=16).digest()


def chat_signed_in(scope: dict) -> None:
    """Remember the request's credential: its user has passed a chat's checks (called by the
    chat view), so its next chats take their places before Django's request path."""
    credential = _credential(scope)
    if credential is None:
        return
    _signed_in[credential] = None
    _signed_in.move_to_end(credential)
    if len(_signed_in) > SIGNED_IN_KEPT:
        _signed_in.popitem(last=False)


def _forgotten(scope: dict) -> None:
    """Forget the request's credential: its chat was refused as signed in by no one or no
    member (logged out, its token revoked, its user removed), so its next chats go through
    Django's checks before they take a place, as a stranger's do."""
    credential = _credential(scope)
    if credential is not None:
        _signed_in.pop(credential, None)


def _known(scope: dict) -> bool:
    credential = _credential(scope)
    if credential is None or credential not in _signed_in:
        return False
    _signed_in.move_to_end(credential)
    return True


def chat_slot(scope: dict) -> StartSlot | None:
    """The place taken for this request by ChatAdmission (none under the test Client)."""
    return scope.get(SCOPE_KEY)


class ChatAdmission:
    """ASGI middleware: a chat's place among the starts under way, taken before Django."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or not CHAT_PATH.fullmatch(scope["path"])
            or not _known(scope)
            or draining()  # refused in the view, with no place (rojos.turns.admission)
        ):
            return await self.app(scope, receive, send)
        received = []
        while True:  # the body first: a client sending it slowly holds no place
            message = await receive()
            received.append(message)
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        if message["type"] != "http.request":  # gone before its body was in
            return await self.app(scope, _replayed(received, receive), send)
        slot = await start_admit()

        def answered(message):
            # Given back before a refusal reaches its client, not after it is written: by
            # then the view has either handed the place to its turn or not started one.
            # (A plain function returning send's awaitable: no coroutine of its own for
            # each streamed chunk, roject/server/write_timeout.py.)
            if message["type"] == "http.response.start":
                slot.release_unless_handed()
                if message["status"] in (401, 403):
                    _forgotten(scope)
            return send(message)

        try:
            await self.app({**scope, SCOPE_KEY: slot}, _replayed(received, receive), answered)
        finally:
            slot.release_unless_handed()


def _replayed(received: list[dict], receive):
    """`receive`, its messages already taken given first."""

    async def replay():
        return received.pop(0) if received else await receive()

    return replay
