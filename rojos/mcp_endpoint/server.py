"""The SDK's MCP server (its low-level Server) and its handlers: list the project's tools,
call one. Each handler reads who calls from the request (caller.caller_of) and checks the
token and the user's role again, as every call does."""

import asyncio
from importlib.metadata import PackageNotFoundError, version

import mcp_types as types
from asgiref.sync import sync_to_async
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, INVALID_REQUEST

from roject.identity.tokens import api_token_live
from roject.members.access import project_role
from roject.server.db_threads import db_context
from roject.storage import StorageError

from ..tools import echoed, registry
from .caller import McpCaller, caller_of
from .calls import McpResult, mcp_call
from .listing import mcp_tools
from .resources import TEMPLATE, resource_path, resource_read, resources_list

INSTRUCTIONS = (
    "The files of one Rojo Chat project. Paths are relative to the project's root. Every "
    "change is recorded and can be undone in Rojo Chat; calls that change files are refused "
    "for viewers of the project and for read-only tokens."
)


def _may_write(caller: McpCaller) -> bool | None:
    """(Blocking) Whether the caller may write now; None when the token is no longer live
    or its user no longer a member."""
    if api_token_live(token_id=caller.token_id) is None:
        return None
    role = project_role(user=caller.user_id, project_id=caller.project_id)
    if role is None:
        return None
    return role.can_write and not caller.read_only


async def _may_write_now(ctx: ServerRequestContext) -> tuple[McpCaller, bool]:
    """The caller, and whether it may write; an error once its token or membership ended."""
    caller = caller_of(ctx)
    async with db_context():
        can_write = await sync_to_async(_may_write)(caller)
    if can_write is None:
        raise MCPError(code=INVALID_REQUEST, message="The token or the membership has ended.")
    return caller, can_write


async def _list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    _caller, can_write = await _may_write_now(ctx)
    return types.ListToolsResult(tools=mcp_tools(registry, can_write=can_write))


async def _list_resources(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    caller, _ = await _may_write_now(ctx)
    # Files alone, no database: on a thread of its own, not one of the few database threads
    # every request and turn waits on (as the web's file API reads).
    found = await asyncio.to_thread(resources_list, project_id=caller.project_id)
    return types.ListResourcesResult(resources=found)


async def _list_resource_templates(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    await _may_write_now(ctx)
    return types.ListResourceTemplatesResult(resource_templates=[TEMPLATE])


async def _read_resource(
    ctx: ServerRequestContext, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    caller, _ = await _may_write_now(ctx)
    path = resource_path(params.uri)
    if path is None:
        named = echoed(params.uri)
        raise MCPError(code=INVALID_PARAMS, message=f"Not a file of this project: {named}")
    try:
        return await asyncio.to_thread(
            resource_read, project_id=caller.project_id, uri=params.uri, path=path
        )
    except StorageError as exc:
        raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None


def _result(result: McpResult) -> types.CallToolResult:
    """What the client reads: the text the model would read, the value as JSON when it is
    an object, and where the call is kept (conversation, change record) in `_meta`."""
    meta = {"rojo.chat/conversation": result.conversation_id}
    if result.change_id is not None:
        meta["rojo.chat/change"] = result.change_id
    return types.CallToolResult(
        content=[types.TextContent(text=result.text)],
        structured_content=result.value if isinstance(result.value, dict) else None,
        is_error=not result.ok,
        _meta=meta,
    )


async def _call_tool(
    ctx: ServerRequestContext, params: types.CallToolRequestParams
) -> types.CallToolResult:
    result = await mcp_call(caller=caller_of(ctx), name=params.name, arguments=params.arguments)
    return _result(result)


def _version() -> str:
    try:
        return version("rojo-chat")
    except PackageNotFoundError:
        return "0"


mcp_server = Server(
    "rojo-chat",
    version=_version(),
    title="Rojo Chat",
    instructions=INSTRUCTIONS,
    on_list_tools=_list_tools,
    on_call_tool=_call_tool,
    on_list_resources=_list_resources,
    on_list_resource_templates=_list_resource_templates,
    on_read_resource=_read_resource,
)
