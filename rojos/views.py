"""The pages: a project's workspace (its files beside the chat)."""

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie

from roject.access import project_access

from .models import Rojo
from .selectors import conversation_list, rojo_list
from .tools import registry


def _rojo_config(rojo: Rojo) -> dict:
    tools = [registry.get(name) for name in rojo.tools or ()]
    return {
        "id": rojo.pk,
        "slug": rojo.slug,
        "name": rojo.name,
        "model": rojo.model,
        "tools": [{"name": t.name, "writes": t.writes} for t in tools if t is not None],
        "mcpServers": [link.server.name for link in rojo.mcp_links.all()],
    }


@ensure_csrf_cookie
@login_required
def project_page(request, project_id: int, conversation_id: int | None = None):
    """A project's files, its conversations and the chat panel."""
    access = project_access(user=request.user, project_id=project_id)
    conversations = conversation_list(project=access.project)
    current = None
    if conversation_id is not None:
        current = conversations.filter(pk=conversation_id).first()
        if current is None:
            raise Http404("No such conversation.")
    config = {
        "project": {"id": access.project.pk, "name": access.project.name},
        "role": access.role,
        "canWrite": access.can_write,
        "conversation": current.pk if current else None,
        "rojo": (current.rojo_id if current and current.rojo_id else None),
        "rojos": [_rojo_config(rojo) for rojo in rojo_list()],
        "writingTools": [tool.name for tool in registry if tool.writes],
    }
    return render(
        request,
        "project.html",
        {
            "access": access,
            "project": access.project,
            "conversations": conversations[:200],
            "current": current,
            "config": config,
        },
    )
