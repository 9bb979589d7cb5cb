"""Rojo as an MCP server: /mcp/projects/<project id or slug> serves a project's tools to
outside agents over MCP's streamable HTTP transport, with the official SDK (`mcp`).

`app` is the HTTP side (the token, the host, the project, the SDK's session manager),
`server` the SDK server and its handlers, `listing` our tools as MCP tools, `calls` one
call run as a turn of the token's MCP conversation (role checks, limits, undo records).
"""
