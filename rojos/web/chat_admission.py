"""A chat request takes its start's place (rojos.turns.admission) as its body is in, before
Django's request path: its session, user, CSRF and access checks then run in their turn too.

Taken in the view, the place came after those: 200 chats sent at once each had their checks
done (and their session and user read on the database threads) before the first admitted one
went on, so every start waited for all the others' checks. Every check still runs, in the
same order, and an unauthenticated request gives its place back as it is refused.

The place is taken once the request's body is in (UploadSizeGuard, outside, bounds it), so a
client sending it slowly holds none; it is handed to the view in the ASGI scope, and given
back here when the request ends without a turn having taken it.
"""

import re

from rojos.turns.admission import StartSlot, start_admit

CHAT_PATH = re.compile(r"/api/projects/[^/]+/chat")
SCOPE_KEY = "rojo.start_slot"


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

        async def answered(message):
            # Given back before a refusal reaches its client, not after it is written: by
            # then the view has either handed the place to its turn or not started one.
            if message["type"] == "http.response.start":
                slot.release_unless_handed()
            await send(message)

        try:
            await self.app({**scope, SCOPE_KEY: slot}, _replayed(received, receive), answered)
        finally:
            slot.release_unless_handed()


def _replayed(received: list[dict], receive):
    """`receive`, its messages already taken given first."""

    async def replay():
        return received.pop(0) if received else await receive()

    return replay
