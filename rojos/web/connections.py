"""The person's connected accounts on MCP servers that ask for OAuth: /connections/.

Connect and Disconnect are POSTs (Django's CSRF check; the person is checked before the
body is read by anything of ours). Connect sends the browser to the server's authorization
server, as the SDK discovers it; the provider sends it back to /connections/callback/, which
finishes only a sign-in this person began in this login session, once (`connect.pending`).
The shared connection of a server is connected the same way, by a superuser, from the
server's admin page. On an https site, Connect offers the SDK Rojo's client ID metadata
document (`client_metadata`). A connection made and a disconnect are audited.
"""

from asgiref.sync import async_to_sync
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from roject.audit.log import audit_actor
from roject.members.selectors import membership_any
from rojos.mcp.spec import ServerSpec
from rojos.models import McpServer

from .client_metadata import client_sign_in

# Every rojo, and so every server, can be used in any project; only a member of one uses a
# server, and leaving the last project deletes the accounts (rojos/mcp/connect/removal.py).
# Each view imports the sign-in's modules when it runs: they bring the MCP SDK (over a second),
# and the URLconf, so every management command, imports this module; a server imports them at
# start (rojos/eager.py).
_MEMBERS_ONLY = "Only a member of a project connects an account."
_SUPERUSERS_ONLY = "Only a superuser connects a server's shared account."


def _server(slug: str, *, shared: bool = False) -> McpServer:
    """An HTTP server that signs in per person (or, `shared`, with one shared account)."""
    mode = McpServer.SignIn.SHARED if shared else McpServer.SignIn.PERSON
    server = McpServer.objects.filter(slug=slug, transport=McpServer.Transport.HTTP).first()
    if server is None or server.sign_in != mode:
        raise Http404("No such MCP server.")
    return server


def _back(request, shared: bool):
    if shared:
        return redirect(reverse("admin:rojos_mcpserver_changelist"))
    return redirect("mcp_connections")


@never_cache
@login_required
@require_GET
def connections_page(request):
    """Each server a member signs in to, whether they are connected, Connect / Disconnect."""
    from rojos.mcp.accounts import account_connected

    servers = McpServer.objects.filter(
        transport=McpServer.Transport.HTTP, sign_in=McpServer.SignIn.PERSON
    )
    rows = [
        {
            "server": server,
            "connected": account_connected(server_id=server.pk, user_id=request.user.pk),
        }
        for server in servers
    ]
    return render(request, "connections.html", {"rows": rows})


@login_required
@require_POST
def connect_view(request, slug: str):
    """Start the sign-in: to the authorization server, or back here when already signed in.
    A person's own account is for members of a project; the shared one, for superusers."""
    from rojos.mcp.connect.flow import ConnectError, sign_in_begin

    member = membership_any(user=request.user)
    if not (member or request.user.is_superuser):
        raise PermissionDenied(_MEMBERS_ONLY)
    shared = request.POST.get("shared") == "1"
    if shared and not request.user.is_superuser:
        raise PermissionDenied(_SUPERUSERS_ONLY)
    if not shared and not member:
        raise PermissionDenied(_MEMBERS_ONLY)
    server = _server(slug, shared=shared)
    if not request.session.session_key:
        request.session.save()
    site = client_sign_in(request)
    try:
        url = async_to_sync(sign_in_begin)(
            spec=ServerSpec.of(server),
            user_id=request.user.pk,
            shared=shared,
            session_key=request.session.session_key,
            redirect_uri=site.redirect_uri,
            client_metadata_url=site.client_metadata_url,
        )
    except ConnectError as exc:
        messages.error(request, str(exc))
        return _back(request, shared)
    if url is None:
        messages.success(request, f"{server.name} is connected.")
        return _back(request, shared)
    return redirect(url)


@never_cache
@login_required
@require_GET
def connect_callback(request):
    """The authorization server sent the browser back: finish the sign-in its state names,
    for a person still a member of a project (the shared account: a superuser's)."""
    from rojos.mcp.connect.flow import ConnectError, sign_in_finish, sign_in_pending

    try:
        pending = sign_in_pending(
            user_id=request.user.pk,
            session_key=request.session.session_key or "",
            state=request.GET.get("state", ""),
        )
    except ConnectError as exc:
        messages.error(request, str(exc))
        return redirect("mcp_connections")
    # Checked again: the right may have gone while the person was at the provider.
    if pending.shared and not request.user.is_superuser:
        raise PermissionDenied(_SUPERUSERS_ONLY)
    if not pending.shared and not membership_any(user=request.user):
        raise PermissionDenied(_MEMBERS_ONLY)
    server = McpServer.objects.filter(pk=pending.server_id).exclude(sign_in="").first()
    if server is None:
        raise Http404("No such MCP server.")
    if "code" not in request.GET:
        why = request.GET.get("error", "no code")[:100]
        messages.error(request, f"{server.name} was not connected: the provider answered {why}.")
        return _back(request, pending.shared)
    try:
        async_to_sync(sign_in_finish)(
            spec=ServerSpec.of(server),
            pending=pending,
            user_id=request.user.pk,
            code=request.GET["code"],
            iss=request.GET.get("iss"),
            actor=audit_actor(request),
        )
    except ConnectError as exc:
        messages.error(request, str(exc))
        return _back(request, pending.shared)
    what = "The shared connection to" if pending.shared else "Your account on"
    messages.success(request, f"{what} {server.name} is connected.")
    return _back(request, pending.shared)


@login_required
@require_POST
def disconnect_view(request, slug: str):
    """Delete the person's tokens for the server (a superuser's `shared=1`: the shared ones)."""
    from rojos.mcp.connect.flow import account_forget
    from rojos.mcp.pool import mcp_account_sessions_stop

    shared = request.POST.get("shared") == "1"
    if shared and not request.user.is_superuser:
        raise PermissionDenied("Only a superuser disconnects a server's shared account.")
    server = _server(slug, shared=shared)
    user_id = None if shared else request.user.pk
    account_forget(spec=ServerSpec.of(server), user_id=user_id, actor=audit_actor(request))
    mcp_account_sessions_stop(server.slug, user_id)
    messages.success(request, f"{server.name} is disconnected.")
    return _back(request, shared)
