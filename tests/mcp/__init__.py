"""MCP both ways: servers' tools for rojos, and each project as a server."""
