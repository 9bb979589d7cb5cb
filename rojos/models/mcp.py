"""MCP servers a rojo can take tools from, and which of them each rojo uses."""

import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")


def _validate_names(value, pattern: re.Pattern, what: str) -> None:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and pattern.match(k) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValidationError(f"must be a JSON object of {what} names to strings")


def validate_env(value) -> None:
    _validate_names(value, _ENV_NAME, "environment variable")


def validate_headers(value) -> None:
    _validate_names(value, _HEADER_NAME, "HTTP header")


def validate_args(value) -> None:
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise ValidationError("must be a JSON list of strings")


class McpServer(models.Model):
    """An MCP server: a command run over stdio, or a streamable HTTP URL.

    Secrets are either named (`env_from`, `headers_from`: environment variables of this
    app read when the server starts) or stored write-only (`env`, `headers`: the admin
    shows their names, never their values).
    """

    class Transport(models.TextChoices):
        STDIO = "stdio", "stdio (a command)"
        HTTP = "http", "streamable HTTP (a URL)"

    class SignIn(models.TextChoices):
        NONE = "", "none (fixed headers)"
        PERSON = "person", "each member signs in (OAuth)"
        SHARED = "shared", "shared connection (an admin's account, OAuth)"

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=40, unique=True)
    transport = models.CharField(max_length=10, choices=Transport.choices)
    command = models.CharField(
        max_length=500, blank=True, help_text="stdio: the program, e.g. npx or uvx."
    )
    args = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_args],
        help_text='stdio: its arguments, e.g. ["mcp-server-time"]; {project_root} is replaced '
        "by the project's directory, which is also its working directory.",
    )
    env = models.JSONField(default=dict, blank=True, validators=[validate_env], editable=False)
    env_from = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_env],
        help_text='stdio: variables set from this app\'s environment, {"NAME": "ENVVAR"}.',
    )
    url = models.URLField(max_length=500, blank=True, help_text="streamable HTTP: the endpoint.")
    headers = models.JSONField(
        default=dict, blank=True, validators=[validate_headers], editable=False
    )
    headers_from = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_headers],
        help_text='HTTP: headers set from this app\'s environment, {"Authorization": "ENVVAR"}.',
    )
    sign_in = models.CharField(
        max_length=10,
        choices=SignIn.choices,
        default=SignIn.NONE,
        blank=True,
        help_text="HTTP: how Rojo signs in to the server. None: the fixed headers above. Each "
        "member signs in: every member connects their own account (OAuth) and the server acts "
        "as them. Shared connection: an admin signs in once (a service account) and every "
        "member's calls act as that account.",
    )
    oauth_client_id = models.CharField(
        max_length=500,
        blank=True,
        help_text="OAuth: a client ID registered with the server's authorization server for "
        "Rojo (its redirect URI: <site>/connections/callback/). Empty: Rojo registers itself "
        "where the authorization server allows it.",
    )
    oauth_issuer = models.URLField(
        max_length=500,
        blank=True,
        help_text="OAuth, with a client ID: the authorization server (its issuer URL) the client "
        "was registered with. The SDK sends the credentials to no other: a server that names "
        "another authorization server gets none of them.",
    )
    # Sealed like the tokens (rojos.mcp.sealed); written through the admin, never shown.
    oauth_client_secret = models.BinaryField(default=b"", blank=True, editable=False)
    trusted = models.BooleanField(
        default=False,
        help_text="Trust this server's tool annotations: its tools marked readOnlyHint run "
        "without approval and are offered to viewers. Untrusted (the default), every tool of "
        "the server counts as one that writes: offered only to editors and owners, and asking "
        "for approval under the rojo's rules.",
    )
    # The last tools/list the admin asked for: what it shows and offers to choose from.
    listed_tools = models.JSONField(default=list, blank=True, editable=False)
    listed_at = models.DateTimeField(null=True, blank=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP server"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.transport == self.Transport.STDIO and not self.command:
            raise ValidationError({"command": "a stdio server needs a command"})
        if self.transport == self.Transport.HTTP and not self.url:
            raise ValidationError({"url": "a streamable HTTP server needs a URL"})
        if self.sign_in and self.transport != self.Transport.HTTP:
            raise ValidationError({"sign_in": "only a streamable HTTP server signs in with OAuth"})
        if self.oauth_client_id and not self.oauth_issuer:
            raise ValidationError(
                {"oauth_issuer": "name the authorization server the client ID belongs to"}
            )

    @property
    def per_person(self) -> bool:
        return self.sign_in == self.SignIn.PERSON


class RojoMcpServer(models.Model):
    """A rojo's use of an MCP server: all its tools (`tools` null) or the listed ones."""

    rojo = models.ForeignKey("rojos.Rojo", on_delete=models.CASCADE, related_name="mcp_links")
    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="rojo_links")
    tools = models.JSONField(
        null=True,
        blank=True,
        help_text="Empty: all of the server's tools. Else a JSON list of its tool names, e.g. "
        '["get_current_time"].',
    )
    ask_before = models.BooleanField(
        default=True,
        help_text="Its tools wait for approval, but for those the server marks read-only.",
    )

    class Meta:
        ordering = ["server__name"]
        constraints = [
            models.UniqueConstraint(fields=["rojo", "server"], name="rojo_mcp_server_once")
        ]
        verbose_name = "MCP server"

    def __str__(self) -> str:
        return f"{self.server} for {self.rojo}"

    def clean(self) -> None:
        if self.tools is not None and not (
            isinstance(self.tools, list) and all(isinstance(t, str) for t in self.tools)
        ):
            raise ValidationError({"tools": "must be empty or a JSON list of tool names"})


class McpAccount(models.Model):
    """A person's sign-in to an MCP server that asks for OAuth (`user` empty: the one shared
    connection, an admin's service account): the SDK's tokens and client record, each sealed
    with the keys of the settings (`rojos.mcp.sealed`), never stored or shown in clear."""

    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="accounts")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,  # a deactivated or deleted person's tokens go with them
        related_name="mcp_accounts",
    )
    tokens = models.BinaryField(default=b"", editable=False)
    # When the access token runs out (from its expires_in, at the write): a later process
    # refreshes it in time, as the process that got it would.
    tokens_expire = models.DateTimeField(null=True, blank=True, editable=False)
    client = models.BinaryField(default=b"", editable=False)
    # What the sign-in discovered (the protected resource's and the authorization server's
    # metadata, public documents): a later process refreshes at that token endpoint, not at
    # a guess on the MCP server's own host.
    discovered = models.JSONField(default=dict, blank=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["server", "user"]
        constraints = [
            models.UniqueConstraint(fields=["server", "user"], name="mcp_account_per_user"),
            models.UniqueConstraint(
                fields=["server"], condition=models.Q(user=None), name="mcp_account_shared_once"
            ),
        ]
        verbose_name = "MCP account"

    def __str__(self) -> str:
        return f"{self.user or 'shared'} on {self.server}"


class McpSignInPending(models.Model):
    """A sign-in under way: the browser was sent to the authorization server and has not come
    back yet. What the SDK's flow needs to finish (the PKCE verifier, the discovered metadata,
    the client record) is sealed in `flow`, so the callback may land on any process; the row
    is found by a digest of the OAuth `state`, bound to the person and the login session that
    started it, used once and valid for minutes (`rojos.mcp.connect.pending`)."""

    state_digest = models.CharField(max_length=64, unique=True)
    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    session_digest = models.CharField(max_length=64)
    shared = models.BooleanField(default=False)  # an admin signing in the shared connection
    flow = models.BinaryField(editable=False)
    expires = models.DateTimeField(db_index=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created"]
        verbose_name = "MCP sign-in under way"

    def __str__(self) -> str:
        return f"{self.user} signing in to {self.server}"
