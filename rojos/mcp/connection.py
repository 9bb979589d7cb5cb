"""One MCP session, owned by one asyncio task: started at first use, stopped when idle.

The SDK's client holds anyio cancel scopes that must be entered and left in the same task,
so the session is entered, served and left by a task of its own (made with a fresh context,
so it outlives the turn that started it). Turns call through it from their own tasks: a
call is a request on the session, cancelled with the turn. A stdio server's exit (the end
of its stderr) or a closed connection ends the session; the next use starts a new one.
"""

import asyncio
import contextlib
import contextvars
import functools
import logging
from contextlib import AsyncExitStack
from pathlib import Path

import httpx2
import mcp_types as types
from django.conf import settings
from mcp import Client
from mcp.shared.exceptions import MCPError

from . import exit_hook
from .call_timing import call_timed
from .process_log import StderrPipe
from .progress import OnProgress
from .questions import DECLINED, BoundAsker, asker_current, elicit_result, question_from
from .spec import ServerSpec
from .transport import (
    McpUnavailable,
    client_make,
    secrets_scrubbed,
    start_failure,
    tools_changes_follow,
    tools_list,
)

# Callers import these from here, as before the opening moved to `transport`.
__all__ = ["McpConnection", "McpUnavailable", "secrets_scrubbed"]

logger = logging.getLogger("rojos.mcp")

_RETRY_SECONDS = 5.0  # a server that failed to start is not tried again sooner
_CLOSE_SECONDS = 15.0  # the SDK's shutdown takes at most about 6 s (stdin, TERM, KILL)


class McpConnection:
    """The session with one server for one project, in this process and event loop."""

    def __init__(
        self,
        spec: ServerSpec,
        root: Path,
        auth: httpx2.Auth | None = None,
        user_id: int | None = None,
    ) -> None:
        self.spec = spec
        self.root = root
        self.auth = auth  # an HTTP server's sign-in (`oauth`), kept across its sessions
        self.user_id = user_id  # the person it signs in as, if one
        self.pid: int | None = None
        self.protocol_version: str | None = None  # as negotiated by the last session
        self._task: asyncio.Task | None = None
        self._ready: asyncio.Future | None = None
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._in_flight = 0
        self._askers: list[BoundAsker | None] = []  # of the calls in flight (`questions`)
        self._used = 0.0
        self._tools: list[types.Tool] | None = None
        self._stale = True
        self._failed: tuple[float, str] | None = None
        self._loop = asyncio.get_running_loop()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def tools(self) -> list[types.Tool]:
        """The server's tools, listed once and again after it said they changed."""
        client = await self._client()
        if self._stale or self._tools is None:
            self._stale = False
            try:
                with self._using():
                    self._tools = await asyncio.wait_for(
                        tools_list(client=client, spec=self.spec), settings.ROJO_MCP_CALL_TIMEOUT
                    )
            except BaseException:
                self._stale = True
                raise
        return self._tools

    @contextlib.contextmanager
    def _using(self):
        """A request is running: the session is not idle until it ends."""
        self._in_flight += 1
        try:
            yield
        finally:
            self._in_flight -= 1
            self._used = self._loop.time()
            self._wake.set()

    @contextlib.contextmanager
    def _asking(self, asker: BoundAsker | None):
        """A call is in flight: a question on the session is its asker's if it is the only one."""
        self._askers.append(asker)
        try:
            yield
        finally:
            self._askers.remove(asker)

    async def _on_question(self, context, params: types.ElicitRequestParams) -> types.ElicitResult:
        """(The session's task) A question from the server: to the person whose call it is
        (`questions`), declined when nobody can answer or nobody can tell whose it is."""
        # On a 2026 connection the SDK asks from the caller's own task: its asker is known.
        askers = [own] if (own := asker_current()) is not None else self._askers
        question = question_from(params, self.spec.name)
        if len(askers) != 1 or askers[0] is None or question is None:
            logger.info(
                "MCP server %s asked a question nobody can answer (%d calls in flight): declined",
                self.spec.slug,
                len(askers),
            )
            return types.ElicitResult(action=DECLINED.action)
        return elicit_result(question, await askers[0](question))

    def scrubbed(self, text: str) -> str:
        """The server's words without its secrets, its sign-in's tokens among them."""
        return secrets_scrubbed(self.spec, text, self.auth)

    def mark_stale(self) -> None:
        self._stale = True

    async def call(
        self, name: str, arguments: dict, *, on_progress: OnProgress | None = None
    ) -> types.CallToolResult:
        """One tools/call; MCPError, TimeoutError or a transport error when it fails.

        The call may go ROJO_MCP_CALL_TIMEOUT without a word from the server: each progress
        notification (handed to `on_progress`) starts that time again, so a long call that
        keeps reporting runs on, up to ROJO_MCP_CALL_MAX_SECONDS in all. A call that timed
        out stops the session (the next use starts the server again): a server that hangs,
        or keeps sending what is not its answer, is not left running with the session
        wedged on it."""
        quiet = settings.ROJO_MCP_CALL_TIMEOUT
        asker = asker_current()
        if asker is not None:  # the person's time to answer is not the server's
            quiet += settings.ROJO_ELICITATION_SECONDS
        client = await self._client()
        try:
            with self._using(), self._asking(asker):
                return await call_timed(
                    client, name, arguments, quiet=quiet, on_progress=on_progress
                )
        except MCPError as exc:
            if exc.error.code in (types.CONNECTION_CLOSED, types.REQUEST_TIMEOUT):
                self.stop()  # the next use starts the server again
            raise
        except (TimeoutError, httpx2.TransportError, OSError):
            self.stop()
            raise

    def stop(self) -> None:
        """End the session (its task leaves the client, which stops a stdio process)."""
        self._stop.set()
        self._wake.set()

    async def aclose(self) -> None:
        """Stop and wait until the session is left (its server gone)."""
        self.stop()
        task = self._task
        if task is None:
            return
        if self._ready is not None and not self._ready.done():
            task.cancel()  # still starting: nothing but a cancellation ends the handshake
        try:
            await asyncio.wait_for(asyncio.shield(task), _CLOSE_SECONDS)
        except TimeoutError:
            task.cancel()
        except BaseException:  # how the session ended was logged by its task
            pass

    async def _client(self) -> Client:
        self._used = self._loop.time()  # a use: not idle while it waits for the session
        failed = self._failed
        if failed and self._loop.time() - failed[0] < _RETRY_SECONDS:
            raise McpUnavailable(failed[1])
        if self.running and self._stop.is_set():  # ending (a crash): wait, then start anew
            await asyncio.wait([self._task])  # its end, not its outcome
        if not self.running:
            self._start()
        assert self._ready is not None
        try:
            return await asyncio.wait_for(
                asyncio.shield(self._ready), settings.ROJO_MCP_START_TIMEOUT
            )
        except TimeoutError:
            # The handshake is not answered: cancel the task (once; the SDK's shutdown, in
            # its shielded scope, still stops the process).
            self.stop()
            self._task.cancel()
            message = (
                f"the MCP server {self.spec.name!r} did not answer within "
                f"{settings.ROJO_MCP_START_TIMEOUT:g} s of starting (ROJO_MCP_START_TIMEOUT)"
            )
            self._failed = (self._loop.time(), message)
            raise McpUnavailable(message) from None

    def _start(self) -> None:
        self._stop = asyncio.Event()
        self._ready = self._loop.create_future()
        self._stale = True
        self._used = self._loop.time()
        # A fresh context: the session must not belong to the turn that happened to start it.
        self._task = self._loop.create_task(self._own(), context=contextvars.Context())

    async def _own(self) -> None:
        ready = self._ready
        pipe = None
        try:
            async with AsyncExitStack() as stack:
                if self.spec.stdio:
                    pipe = StderrPipe(
                        self.spec.slug,
                        functools.partial(self._exited, self._stop),
                        functools.partial(secrets_scrubbed, self.spec),
                    )
                    stack.callback(pipe.spawned)
                client = await stack.enter_async_context(
                    client_make(
                        spec=self.spec,
                        root=self.root,
                        pipe=pipe,
                        stack=stack,
                        on_message=self._on_message,
                        on_question=self._on_question,
                        auth=self.auth,
                    )
                )
                if pipe is not None:
                    pipe.spawned()
                    self.pid = pipe.child_pid()
                    exit_hook.track(self.pid)
                    stack.callback(exit_hook.untrack, self.pid)
                self.protocol_version = client.protocol_version
                await tools_changes_follow(stack=stack, client=client, on_change=self.mark_stale)
                self._failed = None
                self._used = self._loop.time()  # idle from now, not from the spawn
                ready.set_result(client)
                await self._serve()
        except Exception as exc:
            message = self.scrubbed(start_failure(self.spec, exc))
            if not ready.done():
                logger.warning("%s", message, exc_info=exc)
                self._failed = (self._loop.time(), message)
                ready.set_exception(McpUnavailable(message))
            else:
                logger.warning("MCP server %s: the session ended: %r", self.spec.slug, exc)
        finally:
            if not ready.done():
                ready.set_exception(McpUnavailable(f"the MCP server {self.spec.name!r} stopped"))
            ready.exception()  # retrieved: no warning when nobody waits for it

    async def _on_message(self, message) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.mark_stale()
        elif isinstance(message, Exception):
            logger.warning("MCP server %s sent something unreadable: %s", self.spec.slug, message)

    async def _serve(self) -> None:
        """Wait until stopped, or idle past ROJO_MCP_IDLE_SECONDS with no call running."""
        while not self._stop.is_set():
            idle = settings.ROJO_MCP_IDLE_SECONDS
            left = self._used + idle - self._loop.time()
            if self._in_flight == 0 and left <= 0:
                logger.info("MCP server %s: idle for %g s, stopped", self.spec.slug, idle)
                # Ending, as a crash's session is: a use until its server is gone waits for
                # that and starts it anew, not a call on the session being left.
                self._stop.set()
                return
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(left, 0.05))

    def _exited(self, stop: asyncio.Event) -> None:
        """(Pipe thread) The process and all it started are gone: end its session (`stop`
        is that session's), never a newer one started since the crash was noticed."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to stop
            self._loop.call_soon_threadsafe(self._session_stop, stop)

    def _session_stop(self, stop: asyncio.Event) -> None:
        if stop is self._stop:
            self.stop()
        else:
            stop.set()  # an older session's: the current one goes on
