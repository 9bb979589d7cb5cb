"""MCP tools as rojo tools, and the registry of a turn that uses MCP servers."""

import asyncio
import logging
from dataclasses import replace

import httpx2
import mcp_types as types
from asgiref.sync import sync_to_async
from django.conf import settings
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ..tools import RojoTool, RojoToolContext, RojoToolRegistry, ToolError
from .accounts import account_connected
from .connection import McpUnavailable
from .names import model_tool_name
from .pool import mcp_pool
from .progress import CallProgress, Progress, progress_reporter
from .questions import answer_outcome, call_asked, call_id_current
from .results import outcome_from_result
from .schemas import clean_schema
from .spec import McpLink, ServerSpec

logger = logging.getLogger("rojos.mcp")

NOT_UNDOABLE = "changes made by MCP tools are not in the undo ledger"


class McpTool(RojoTool):
    """A tool of an MCP server, under its model-facing name `<server>__<tool>`."""

    undoable = False
    validates_arguments = False  # the server checks them against its own, fuller schema

    def __init__(self, link: McpLink, tool: types.Tool) -> None:
        self.link = link
        self.tool_name = tool.name
        self.name = model_tool_name(link.spec.slug, tool.name)
        described = (tool.description or tool.title or tool.name).strip()
        origin = f"(Tool {tool.name!r} of the MCP server {link.spec.name!r}.)"
        self.description = f"{described}\n{origin}"
        self.parameters = clean_schema(tool.input_schema)
        # A hint is the server's word: it counts only when an admin trusts the server, else
        # a tool that says it reads could write in a viewer's chat with nobody asked.
        annotations = tool.annotations if link.trusted else None
        self.read_only = bool(annotations and annotations.read_only_hint)
        self.writes = not self.read_only
        self.needs_approval = link.ask_before and not self.read_only
        self.mcp_server = link.spec.name

    def _progress(self, connection) -> CallProgress | None:
        """Where the server's progress reports of this call go (the turn's stream), if anywhere."""
        reporter = progress_reporter()
        call_id = call_id_current()
        if reporter is None or call_id is None:
            return None

        def scrubbed(progress: Progress) -> None:
            if progress.message is not None:  # the server's words, as its errors are
                progress = replace(progress, message=connection.scrubbed(progress.message))
            reporter(progress)

        return CallProgress(call_id, scrubbed)

    def preview(self, args: dict, ctx: RojoToolContext) -> dict:
        server = self.link.spec.name
        return {"mcp": {"server": server, "tool": self.tool_name, "note": NOT_UNDOABLE}}

    async def execute(self, args: dict, ctx: RojoToolContext):
        spec = self.link.spec
        connection = mcp_pool().connection(spec, ctx.project_root, _user_id(ctx))
        refusal = await signed_out(spec, ctx)
        if refusal:
            connection.stop()  # its tokens were deleted: nothing may go on with them
            raise ToolError(refusal)
        timeout = settings.ROJO_MCP_CALL_TIMEOUT
        server = self.link.spec.name
        progress = self._progress(connection)
        try:
            result = await connection.call(
                self.tool_name, args, on_progress=progress.report if progress else None
            )
        except McpUnavailable as exc:
            raise ToolError(str(exc)) from None
        except TimeoutError:
            raise ToolError(
                f"the MCP server {server!r} did not answer within {timeout:g} s "
                "(ROJO_MCP_CALL_TIMEOUT, counted again from each progress report it sends); "
                "the call was cancelled"
            ) from None
        except MCPError as exc:
            if exc.error.code == types.REQUEST_TIMEOUT:
                bound = settings.ROJO_MCP_CALL_MAX_SECONDS
                raise ToolError(
                    f"the MCP server {server!r} did not finish within {bound:g} s "
                    "(ROJO_MCP_CALL_MAX_SECONDS, however much progress it reports); "
                    "the call was cancelled"
                ) from None
            if exc.error.code == types.CONNECTION_CLOSED:
                raise ToolError(
                    f"the MCP server {server!r} stopped during the call (it is started "
                    "again on the next use)"
                ) from None
            answered = connection.scrubbed(exc.error.message)
            raise ToolError(f"the MCP server {server!r} answered: {answered}") from None
        except (httpx2.TransportError, OSError) as exc:
            logger.warning("MCP server %s cannot be reached", server, exc_info=exc)
            raise ToolError(
                f"the MCP server {server!r} cannot be reached ({exc.__class__.__name__})"
            ) from None
        except (ValidationError, ValueError, RuntimeError) as exc:
            logger.warning("MCP server %s: unreadable answer", server, exc_info=exc)
            raise ToolError(
                f"the MCP server {server!r} sent an answer that is not valid MCP"
            ) from None
        finally:
            if progress is not None:
                progress.close()  # its last report before its result
        outcome = outcome_from_result(result)
        if not outcome.ok:
            raise ToolError(connection.scrubbed(outcome.error))
        if (unanswered := answer_outcome(call_asked())) is not None:
            return {"result": outcome.value, "question": unanswered}
        return outcome.value


def _user_id(ctx: RojoToolContext) -> int | None:
    return getattr(ctx.user, "pk", None)


def connect_path(spec: ServerSpec) -> str:
    """Where a member connects their account on the server (the activity line links it)."""
    return f"/connections/#mcp-{spec.slug}"


async def signed_out(spec: ServerSpec, ctx: RojoToolContext) -> str | None:
    """Why a server that asks for OAuth cannot be called in this turn (the turn's user, or
    the shared connection, has no account on it), or None: never another member's token."""
    if not spec.sign_in:
        return None
    user_id = _user_id(ctx) if spec.per_person else None
    if spec.per_person and user_id is None:
        return f"the MCP server {spec.name!r} acts as each member, and this call has none"
    if await sync_to_async(account_connected)(server_id=spec.server_id, user_id=user_id):
        return None
    if spec.per_person:
        return (
            f"the MCP server {spec.name!r} acts as each member's own account, and the person "
            f"whose turn this is has not connected theirs: they connect it at "
            f"{connect_path(spec)} (Connect), then ask again"
        )
    return (
        f"the MCP server {spec.name!r} uses a shared connection that no admin has signed in "
        "yet: an admin connects it on the server's admin page"
    )


def _offered(link: McpLink, tools: list[types.Tool]) -> list[types.Tool]:
    return [t for t in tools if link.tools is None or t.name in link.tools]


class TurnTools(RojoToolRegistry):
    """The registry a turn offers: the shared one's tools and its rojo's MCP tools.

    `prepare` lists each server's tools before a step (from the session's cache: no
    request unless the server said its tools changed, no database query). A server that
    cannot be started offers the tools the admin last listed for it, so that a call
    gives the model a tool error saying why, rather than tools vanishing unexplained.
    """

    def __init__(self, base: RojoToolRegistry, links: tuple[McpLink, ...]) -> None:
        super().__init__()
        self._base = base
        self._links = links
        self._tools = dict(base._tools)

    async def prepare(self, ctx: RojoToolContext) -> None:
        listings = await asyncio.gather(*(self._listing(link, ctx) for link in self._links))
        tools = dict(self._base._tools)
        for link, listing in zip(self._links, listings, strict=True):
            for tool in _offered(link, listing):
                adapted = McpTool(link, tool)
                if adapted.name in tools:
                    logger.warning("MCP tool %s is named like another tool; left out", adapted.name)
                    continue
                tools[adapted.name] = adapted
        self._tools = tools

    async def _listing(self, link: McpLink, ctx: RojoToolContext) -> list[types.Tool]:
        try:
            if await signed_out(link.spec, ctx):  # the last listing: a call says how to connect
                return _last_listed(link)
            connection = mcp_pool().connection(link.spec, ctx.project_root, _user_id(ctx))
            return await connection.tools()
        except (McpUnavailable, MCPError, TimeoutError, httpx2.TransportError, OSError) as exc:
            logger.warning("MCP server %s: no tool list (%s)", link.spec.slug, exc)
        except (ValidationError, ValueError, RuntimeError) as exc:
            logger.warning("MCP server %s: unreadable tool list", link.spec.slug, exc_info=exc)
        return _last_listed(link)

    def _refusal(self, tool: RojoTool, ctx: RojoToolContext) -> str | None:
        if isinstance(tool, McpTool):  # enabled by the rojo's link; viewers read only
            if tool.writes and not ctx.can_write:
                return (
                    f"tool {tool.name!r} is not marked read-only by a trusted MCP server, and "
                    "your role in this project is read-only"
                )
            return None
        return super()._refusal(tool, ctx)


def _last_listed(link: McpLink) -> list[types.Tool]:
    """The tools the admin last listed for the server (what a call can say it failed with)."""
    listed = []
    for data in link.listed:
        try:
            listed.append(types.Tool.model_validate(data))
        except ValidationError:
            continue
    return listed
