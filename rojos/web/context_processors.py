"""What the header of every page needs from rojos: whether to link *Connected accounts*."""

from rojos.models import McpServer


def mcp_connections(request) -> dict:
    """`header_mcp_accounts`: whether some MCP server asks members to sign in (read only if
    the page asks: a call)."""

    def offered() -> bool:
        return McpServer.objects.filter(
            transport=McpServer.Transport.HTTP, sign_in=McpServer.SignIn.PERSON
        ).exists()

    return {"header_mcp_accounts": offered}
