"""An MCP server for the error cases: crash, hang, isError, huge output, list_changed, and a
tool whose readOnlyHint lies.

Run over stdio (`python edge.py [PID_FILE]`) or streamable HTTP (`python edge.py --http
PORT`). It writes its process id to PID_FILE (or $EDGE_PID_FILE) and a line to stderr.
"""

import asyncio
import base64
import json
import os
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import ImageContent, TextContent, ToolAnnotations

server = MCPServer("edge")
READ_ONLY = ToolAnnotations(readOnlyHint=True)
# Where it writes its notes and stamp: the folder of its PID_FILE (the project's root, from
# `{project_root}` in its arguments), else its working directory.
WORK = Path(".")


@server.tool(annotations=READ_ONLY)
def echo(text: str, times: int = 1) -> str:
    """Say the text again, `times` times."""
    return " ".join([text] * times)


@server.tool()
def write_note(name: str, text: str) -> str:
    """Write a note into its folder."""
    (WORK / name).write_text(text)
    return f"wrote {len(text)} characters to {(WORK / name).resolve()}"


@server.tool(annotations=READ_ONLY)
def read_stamp() -> str:
    """Read the stamp. (It claims readOnlyHint, yet writes stamp.txt in its folder: a hint a
    client must not trust unless told to.)"""
    (WORK / "stamp.txt").write_text("stamped")
    return "stamped"


@server.tool(annotations=READ_ONLY)
def where() -> dict:
    """The server's working directory and arguments."""
    return {"cwd": os.getcwd(), "argv": sys.argv[1:], "token": os.environ.get("EDGE_TOKEN", "")}


@server.tool()
def crash() -> str:
    """Exit at once, mid-call."""
    os._exit(3)


@server.tool(annotations=READ_ONLY)
async def hang() -> str:
    """Never answer (saying on stderr that the call came)."""
    print("edge server: hanging", file=sys.stderr, flush=True)
    await asyncio.sleep(3600)
    return "late"


@server.tool(annotations=READ_ONLY)
def fail() -> list:
    """Answer with isError."""
    raise ToolError("the disk is on fire")


@server.tool(annotations=READ_ONLY)
def refuse_key(ctx: Context, protocol: bool = False) -> str:
    """Refuse the key it was given (the X-Api-Key header over HTTP, EDGE_TOKEN over stdio),
    quoting it whole and masked, as an isError result or, with `protocol`, as an MCP error."""
    request = ctx.request_context.request
    if request is not None:
        key = request.headers.get("x-api-key", "")
    else:
        key = os.environ.get("EDGE_TOKEN", "")
    message = f"invalid key {key} (a key ending in ****{key[-4:]} was expected elsewhere)"
    if protocol:
        raise MCPError(code=-32602, message=message)
    raise ToolError(message)


WIRE = os.fstat(1).st_ino  # the SDK moves the wire off fd 1 (prints go to stderr)


def _wire_fd() -> int:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            try:
                if os.fstat(fd).st_ino == WIRE:
                    return fd
            except OSError:
                continue
    raise RuntimeError("no wire")


@server.tool(annotations=READ_ONLY)
async def garbage(ctx: Context) -> str:
    """Answer (over stdio) with a line that is not JSON, then a result that is not MCP's."""
    request_id = ctx.request_id
    wire_id = int(request_id) if str(request_id).isdigit() else request_id
    answer = json.dumps({"jsonrpc": "2.0", "id": wire_id, "result": {"content": "not a list"}})
    os.write(_wire_fd(), b"this is not JSON-RPC\n" + answer.encode() + b"\n")
    await asyncio.sleep(0.5)
    return "the real answer, too late"


@server.tool(annotations=READ_ONLY)
def huge(size: int) -> str:
    """Answer with `size` characters."""
    return "x" * size


@server.tool(annotations=READ_ONLY)
def picture() -> list:
    """Answer with a text and an image."""
    data = base64.b64encode(b"\x89PNG" + b"\0" * 96).decode()
    image = ImageContent(type="image", data=data, mimeType="image/png")
    return [TextContent(type="text", text="a picture"), image]


@server.tool(annotations=READ_ONLY)
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool named `name`, and tell the client the tools changed."""
    server.add_tool(lambda: f"I am {name}", name=name, description=f"The tool {name}.")
    await ctx.notify_tools_changed()  # 2026 connections: on the subscription
    if ctx.protocol_version and ctx.protocol_version < "2026":
        await ctx.session.send_tool_list_changed()
    return "added"


def _extra_tools(count: int) -> None:
    """`count` more tools, each with a description of 5,000 characters."""
    for number in range(count):
        server.add_tool(lambda: "extra", name=f"extra_{number}", description="long " * 1000)


def main() -> None:
    _extra_tools(int(os.environ.get("EDGE_EXTRA_TOOLS") or 0))
    args = sys.argv[1:]
    pid_file = os.environ.get("EDGE_PID_FILE")
    if args and args[0] != "--http":
        pid_file = args[0]
    if pid_file:
        Path(pid_file).write_text(str(os.getpid()))
        global WORK
        WORK = Path(pid_file).parent
    print("edge server started", file=sys.stderr, flush=True)
    if args[:1] == ["--http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(args[1]))
    else:
        server.run()
    if os.environ.get("EDGE_LINGER"):  # a server that does not exit when its stdin ends
        time.sleep(3600)


if __name__ == "__main__":
    main()
