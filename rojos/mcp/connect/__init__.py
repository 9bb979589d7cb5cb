"""A person connecting their account on an MCP server that asks for OAuth: the SDK's sign-in
paused at the authorization URL, the pending state kept sealed until Rojo's callback, the
tokens removed with the person's last project or their account."""
