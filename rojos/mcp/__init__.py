"""Tools from MCP servers: their sessions, names, schemas and results."""
