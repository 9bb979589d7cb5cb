"""An MCP server of an older protocol version, over stdio, written by hand (no SDK): it
knows only the initialize handshake and answers the version given as its argument
(`python legacy.py 2024-11-05`), as a server from before that client's version would.

Its one tool, `history`, answers the methods it was sent and the versions the client
offered, so a test sees how the client negotiated down.
"""

import json
import sys

VERSION = sys.argv[1] if len(sys.argv) > 1 else "2024-11-05"
seen: list[dict] = []


def answer(message: dict) -> dict | None:
    method, params = message.get("method"), message.get("params") or {}
    meta = params.get("_meta") or {}  # where a 2026 client puts its version
    stamped = [value for key, value in meta.items() if key.endswith("protocolVersion")]
    offered = params.get("protocolVersion") or (stamped[0] if stamped else None)
    seen.append({"method": method, "protocolVersion": offered})
    if "id" not in message:
        return None  # a notification (initialized)
    if method == "initialize":
        result = {
            "protocolVersion": VERSION,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "legacy", "version": "1"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        schema = {"type": "object", "properties": {}}
        description = "What the client sent, and the versions it offered."
        result = {"tools": [{"name": "history", "description": description, "inputSchema": schema}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": json.dumps(seen)}], "isError": False}
    else:  # server/discover among them: this server predates it
        error = {"code": -32601, "message": f"Method not found: {method}"}
        return {"jsonrpc": "2.0", "id": message["id"], "error": error}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
