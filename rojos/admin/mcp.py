"""The admin of MCP servers: secrets write-only, and a look at the tools a server offers."""

import logging

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.translation import ngettext

from roject.audit.log import AuditAction, audit_actor
from roject.identity.user_admin import SuperusersEdit
from rojos.changes.config_audit import MCP_NAMES_ONLY, config_audit, field_changes
from rojos.models import McpServer, RojoMcpServer
from rojos.models.key_sources import endpoint_moved

logger = logging.getLogger("rojos.mcp")


def _parse_pairs(text: str, what: str) -> dict[str, str]:
    pairs = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise forms.ValidationError(f"each line is {what}=VALUE; got {line.strip()[:40]!r}")
        pairs[name.strip()] = value
    return pairs


class McpServerForm(forms.ModelForm):
    """Stored values of variables and headers are write-only: the form shows their names,
    takes new ones (NAME=VALUE, one a line; `NAME=` removes one) and never renders values.
    Stored headers were meant for the URL's host: a URL moved to another scheme, host or
    port keeps only those given again in the same save (`headers_dropped`)."""

    headers_dropped: tuple[str, ...] = ()

    url = forms.URLField(
        required=False,
        assume_scheme="https",
        help_text="streamable HTTP: the endpoint, e.g. https://mcp.example.com/mcp. Another "
        "scheme, host or port (or another Sign in) removes the accounts connected to it.",
    )
    set_env = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Set variables",
        help_text="stdio: NAME=VALUE, one a line; stored, never shown again. NAME= removes it.",
    )
    set_headers = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Set headers",
        help_text="HTTP: Header=VALUE, one a line; stored, never shown again. Header= removes it.",
    )

    set_oauth_client_secret = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        label="Set OAuth client secret",
        help_text="OAuth: the secret of the client ID above; stored sealed, never shown again. "
        "Leave empty to keep the one stored; a single '-' removes it.",
    )

    class Meta:
        model = McpServer
        fields = [
            "name",
            "slug",
            "transport",
            "command",
            "args",
            "env_from",
            "set_env",
            "url",
            "headers_from",
            "set_headers",
            "sign_in",
            "oauth_client_id",
            "oauth_issuer",
            "set_oauth_client_secret",
            "trusted",
        ]

    def _merged(self, field: str, stored: dict, what: str) -> dict:
        changes = _parse_pairs(self.cleaned_data.get(field) or "", what)
        merged = {**stored, **changes}
        return {k: v for k, v in merged.items() if v != "" or k not in changes}

    def audit_details(self, *, change: bool) -> dict:
        """The changed fields, with values except for variables and headers (their names)."""
        secret = "set_oauth_client_secret"
        fields = [f for f in self.changed_data if f not in ("set_env", "set_headers", secret)]
        before = (
            {n: self.get_initial_for_field(self.fields[n], n) for n in fields} if change else {}
        )
        details = field_changes(
            fields=fields, before=before, after=self.cleaned_data, names_only=MCP_NAMES_ONLY
        )
        for field, what, key in (("set_env", "NAME", "env"), ("set_headers", "Header", "headers")):
            names = set(_parse_pairs(self.cleaned_data.get(field) or "", what))
            if key == "headers":
                names |= set(self.headers_dropped)
            names = sorted(names)
            if names:
                details[key] = names  # the names set or removed; their values are secrets
                details["fields"].append(key)
        if self.cleaned_data.get(secret):
            details["fields"].append("oauth_client_secret")  # that it changed, never its value
        return details

    def clean(self):
        cleaned = super().clean()
        try:
            self.instance.env = self._merged("set_env", self.instance.env or {}, "NAME")
            headers = self._merged("set_headers", self.instance.headers or {}, "Header")
            if self.instance.pk and endpoint_moved(self.instance.url, cleaned.get("url") or ""):
                given = _parse_pairs(self.cleaned_data.get("set_headers") or "", "Header")
                self.headers_dropped = tuple(sorted(name for name in headers if name not in given))
                headers = {name: headers[name] for name in headers if name in given}
            self.instance.headers = headers
        except forms.ValidationError as exc:
            self.add_error(None, exc)
        secret = cleaned.get("set_oauth_client_secret") or ""
        if secret == "-":
            self.instance.oauth_client_secret = b""
        elif secret:
            from rojos.mcp.sealed import seal

            self.instance.oauth_client_secret = seal(secret.encode())
        return cleaned


class RojoMcpServerInline(admin.TabularInline):
    model = RojoMcpServer
    extra = 0
    fields = ["server", "tools", "ask_before"]


@admin.register(McpServer)
class McpServerAdmin(SuperusersEdit, admin.ModelAdmin):
    """A server's command runs as the app, and its headers and environment may name any of
    the app's secrets: only superusers add, change or remove one."""

    form = McpServerForm
    list_display = [
        "name",
        "slug",
        "transport",
        "sign_in",
        "trusted",
        "where",
        "tool_count",
        "listed_at",
    ]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = ["stored_secrets", "shared_connection", "offered_tools", "listed_at"]
    actions = ["refresh_tools"]

    def save_model(self, request, obj, form, change):
        """Save, and audit the change in the admin's transaction (nothing when none was).
        A server moved to another origin, or signing in another way, loses its accounts:
        their tokens were issued for the server as it was (`server_moved`)."""
        from rojos.mcp.connect.removal import server_accounts_forget, server_moved

        stored = McpServer.objects.get(pk=obj.pk) if change else None
        super().save_model(request, obj, form, change)
        details = form.audit_details(change=change)
        if form.headers_dropped:
            messages.warning(
                request,
                f"The stored headers of {obj} were removed ({', '.join(form.headers_dropped)}): "
                "its URL moved to another scheme, host or port. Set them again for the new one.",
            )
        if stored is not None and server_moved(before=stored, after=obj):
            removed = server_accounts_forget(server_id=obj.pk, slug=stored.slug)
            if removed:
                details["accounts_removed"] = removed  # how many, never whose tokens
                details["fields"].append("accounts")
                messages.warning(
                    request,
                    f"The connected accounts on {obj} were removed ({removed}): its URL moved "
                    "to another scheme, host or port, or it signs in another way. Members "
                    "connect again.",
                )
        if change and not details["fields"]:
            return
        action = AuditAction.MCP_SERVER_CHANGED if change else AuditAction.MCP_SERVER_CREATED
        config_audit(action=action, obj=obj, actor=audit_actor(request), details=details)

    def delete_model(self, request, obj):
        with transaction.atomic():
            _server_deleted(obj, request)
            super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            for server in queryset:
                _server_deleted(server, request)
            super().delete_queryset(request, queryset)

    @admin.display(description="command or URL")
    def where(self, server: McpServer) -> str:
        return server.url or " ".join([server.command, *server.args])

    @admin.display(description="tools")
    def tool_count(self, server: McpServer) -> int:
        return len(server.listed_tools or ())

    @admin.display(description="stored secrets (names only)")
    def stored_secrets(self, server: McpServer) -> str:
        names = sorted([*(server.env or {}), *(server.headers or {})])
        if server.oauth_client_secret:
            names.append("OAuth client secret")
        return ", ".join(names) or "none"

    @admin.display(description="shared connection")
    def shared_connection(self, server: McpServer) -> str:
        """Whether the shared account is signed in, and the button that signs it in (a form
        of its own, posted to /connections/: the admin's change form cannot hold one)."""
        from rojos.mcp.accounts import account_connected

        if server.pk is None or server.sign_in != McpServer.SignIn.SHARED:
            return "only for a server whose sign-in is “shared connection”"
        connected = account_connected(server_id=server.pk, user_id=None)
        action = reverse("mcp_disconnect" if connected else "mcp_connect", args=[server.slug])
        return format_html(
            '{} <button type="submit" form="mcp-shared" formaction="{}" name="shared" '
            'value="1">{}</button>',
            "signed in" if connected else "not signed in",
            action,
            "Disconnect" if connected else "Connect",
        )

    @admin.display(description="tools it offers (as last listed)")
    def offered_tools(self, server: McpServer) -> str:
        rows = []
        for tool in server.listed_tools or ():
            hints = tool.get("annotations") or {}
            # A server's own hints count only once an admin trusts it (McpServer.trusted).
            if not server.trusted:
                kind = "counts as writing: the server is not trusted"
            elif hints.get("readOnlyHint"):
                kind = "read-only"
            else:
                kind = "writes"
            rows.append((tool.get("name", "?"), kind, (tool.get("description") or "")[:200]))
        if not rows:
            return "not listed yet: use the action “List the servers' tools now”"
        return format_html(
            "<ul>{}</ul>",
            format_html_join("", "<li><code>{}</code> ({}): {}</li>", rows),
        )

    @admin.action(description="List the servers' tools now", permissions=["change"])
    def refresh_tools(self, request, queryset):
        from rojos.mcp.listing import mcp_server_tools_refresh

        for server in queryset:
            try:
                tools = mcp_server_tools_refresh(server=server, user_id=request.user.pk)
            except Exception as exc:  # shown to the admin; any failure of a foreign server
                logger.warning(
                    "listing the tools of MCP server %s failed", server.slug, exc_info=exc
                )
                self.message_user(request, f"{server}: {exc}", messages.ERROR)
                continue
            offers = (
                f"{len(tools)} {ngettext('tool', 'tools', len(tools))}: "
                + ", ".join(t["name"] for t in tools)
                if tools
                else "no tools"
            )
            self.message_user(request, f"{server} offers {offers}", messages.SUCCESS)


def _server_deleted(server: McpServer, request) -> None:
    config_audit(
        action=AuditAction.MCP_SERVER_DELETED,
        obj=server,
        actor=audit_actor(request),
        details={"slug": server.slug, "transport": server.transport},
    )
