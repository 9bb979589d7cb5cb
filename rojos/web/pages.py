"""The pages: a project's workspace (its files beside the chat)."""

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie

from roject.members.access import project_access
from rojos.context.model_choice import models_offered
from rojos.conversations.listing import PAGE_SIZE, conversation_page, cursor_of
from rojos.models import Conversation, McpServer, Rojo
from rojos.tools import registry
from rojos.web.selectors import rojo_list


def mcp_server_label(server: McpServer) -> str:
    """A server as the rojo bar names it: whose account its tools act as, where it signs in."""
    if server.sign_in == McpServer.SignIn.SHARED:
        return f"{server.name} (shared connection)"
    if server.sign_in == McpServer.SignIn.PERSON:
        return f"{server.name} (your account)"
    return server.name


def _rojo_config(rojo: Rojo) -> dict:
    tools = [registry.get(name) for name in rojo.tools or ()]
    return {
        "id": rojo.pk,
        "slug": rojo.slug,
        "name": rojo.name,
        "model": rojo.model,
        "tools": [{"name": t.name, "writes": t.writes} for t in tools if t is not None],
        "mcpServers": [mcp_server_label(link.server) for link in rojo.mcp_links.all()],
        # The models people may pick in the rojo bar (static/rojo/model-picker.js).
        "models": models_offered(rojo, list(rojo.model_options.all())),
        "anyListed": rojo.any_listed_model,
    }


@ensure_csrf_cookie
@login_required
def project_page(request, project_id: int, conversation_id: int | None = None):
    """A project's files, its conversations and the chat panel."""
    access = project_access(user=request.user, project_id=project_id)
    conversations = conversation_page(project=access.project)
    current = None
    if conversation_id is not None:
        current = Conversation.objects.filter(pk=conversation_id, project=access.project).first()
        if current is None:
            raise Http404("No such conversation.")
    config = {
        "project": {"id": access.project.pk, "name": access.project.name},
        "role": access.role,
        "canWrite": access.can_write,
        "conversation": current.pk if current else None,
        "rojo": (current.rojo_id if current and current.rojo_id else None),
        "rojos": [_rojo_config(rojo) for rojo in rojo_list().prefetch_related("model_options")],
        "model": current.model if current else "",
        "writingTools": [tool.name for tool in registry if tool.writes],
        # An outside agent's calls through MCP: shown with their Undo, never continued here.
        "mcpConversation": bool(current and current.via_mcp),
        # A viewer reads anyone's conversation but continues only their own (selectors).
        "othersConversation": bool(
            current and not access.can_write and current.user_id != request.user.pk
        ),
        "username": request.user.get_username(),
        "nextCursor": cursor_of(conversations[-1]) if len(conversations) >= PAGE_SIZE else "",
    }
    return render(
        request,
        "project.html",
        {
            "access": access,
            "project": access.project,
            "conversations": conversations,
            "current": current,
            "others_conversation": config["othersConversation"],
            "config": config,
            "mcp_url": request.build_absolute_uri(f"/mcp/projects/{access.project.slug}"),
        },
    )


@ensure_csrf_cookie
@login_required
def approvals_page(request):
    """The owner's Approvals inbox: calls waiting for an owner across their projects (the
    entries come from /api/approvals, and again whenever the header's count changes)."""
    return render(request, "approvals.html")
