"""What it takes to reach an MCP server, read from its row once per turn."""

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..models import McpServer, RojoMcpServer

PROJECT_ROOT = "{project_root}"


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """A server's connection settings; a changed server is a different spec (and process)."""

    slug: str
    name: str
    transport: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    env_from: tuple[tuple[str, str], ...] = ()
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    headers_from: tuple[tuple[str, str], ...] = ()
    # OAuth (McpServer.sign_in): "person", "shared" or "" (none); the row's id keys the
    # accounts; the admin's client credentials, the secret still sealed.
    sign_in: str = ""
    server_id: int = 0
    oauth_client_id: str = ""
    oauth_issuer: str = ""
    oauth_client_secret: bytes = field(default=b"", repr=False)

    @classmethod
    def of(cls, server: McpServer) -> "ServerSpec":
        return cls(
            slug=server.slug,
            name=server.name,
            transport=server.transport,
            command=server.command,
            args=tuple(server.args or ()),
            env=tuple(sorted((server.env or {}).items())),
            env_from=tuple(sorted((server.env_from or {}).items())),
            url=server.url,
            headers=tuple(sorted((server.headers or {}).items())),
            headers_from=tuple(sorted((server.headers_from or {}).items())),
            sign_in=server.sign_in if server.transport == McpServer.Transport.HTTP else "",
            server_id=server.pk or 0,
            oauth_client_id=server.oauth_client_id,
            oauth_issuer=server.oauth_issuer,
            oauth_client_secret=bytes(server.oauth_client_secret or b""),
        )

    @property
    def per_person(self) -> bool:
        """Each member signs in: a session belongs to one person."""
        return self.sign_in == McpServer.SignIn.PERSON

    @property
    def stdio(self) -> bool:
        return self.transport == McpServer.Transport.STDIO

    def arguments(self, root: Path) -> list[str]:
        """The command's arguments, `{project_root}` replaced by the project's directory."""
        return [arg.replace(PROJECT_ROOT, str(root)) for arg in self.args]

    def environment(self) -> dict[str, str]:
        """The variables set for the process: stored values and those named, read now."""
        named = {name: os.environ.get(var, "") for name, var in self.env_from}
        return {**dict(self.env), **named}

    def http_headers(self) -> dict[str, str]:
        named = {name: os.environ.get(var, "") for name, var in self.headers_from}
        return {**dict(self.headers), **named}


@dataclass(frozen=True, slots=True)
class McpLink:
    """A rojo's use of a server: its spec, the tools chosen (None: all), approvals."""

    spec: ServerSpec
    tools: frozenset[str] | None
    ask_before: bool
    listed: tuple[dict, ...] = ()  # the last listing the admin saw, when the server is down
    trusted: bool = False  # an admin trusts its annotations (readOnlyHint)

    @classmethod
    def of(cls, link: RojoMcpServer) -> "McpLink":
        chosen = link.tools
        return cls(
            spec=ServerSpec.of(link.server),
            tools=frozenset(chosen) if chosen else None,
            ask_before=link.ask_before,
            listed=tuple(link.server.listed_tools or ()),
            trusted=link.server.trusted,
        )


def rojo_mcp_links(rojo) -> tuple[McpLink, ...]:
    """(Blocking) The servers a rojo uses; no query when the rojo was loaded with
    `mcp_used` (selectors.rojo_get) and uses none."""
    if getattr(rojo, "mcp_used", True) is False:
        return ()
    links = RojoMcpServer.objects.filter(rojo=rojo).select_related("server")
    return tuple(McpLink.of(link) for link in links)
