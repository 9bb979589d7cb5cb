"""A client that closes its connection before its answer cancels its request.

The SDK's stateless JSON answers never read from the client once the body is in, so they
never learn that it left: a call went on to its end for nobody, holding the token's line
in the project. `ClientGone` hands the app its body as it comes, then reads on for the
client's `http.disconnect` and cancels the request's scope. The SDK's own teardown then
cancels the handler (the transport's end cancels the calls in flight), and the call ends
as a stopped turn (./calls.py).
"""

import asyncio

import anyio
from starlette.types import Message, Receive


class ClientGone:
    """A request's receive, watched for the client leaving once the body is read."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._body_read = asyncio.Event()
        self.gone = asyncio.Event()

    async def receive(self) -> Message:
        if self._body_read.is_set():  # only the watch reads on: what it reads is the end
            await self.gone.wait()
            return {"type": "http.disconnect"}
        message = await self._receive()
        if message["type"] == "http.disconnect":
            self.gone.set()
        if message["type"] != "http.request" or not message.get("more_body", False):
            self._body_read.set()
        return message

    async def watch(self, scope: anyio.CancelScope) -> None:
        """Cancel `scope` when the client leaves after sending its body."""
        await self._body_read.wait()
        while not self.gone.is_set():
            if (await self._receive())["type"] == "http.disconnect":
                self.gone.set()
        scope.cancel()
