"""A project's audit log in the app: its owners see its entries; anyone else gets a 404."""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import render
from django.views.decorators.cache import never_cache

from roject.audit.export import EXPORT_FORMATS, audit_entry_list, audit_export_response
from roject.audit.log import AuditAction, audit_actor
from roject.members.access import project_access
from roject.models import AuditEntry, Role

PAGE_SIZE = 50


def _owned(request, project_id: int):
    """The project if the user owns it; a 404 for anyone else, as for a missing project."""
    access = project_access(user=request.user, project_id=project_id)
    if access.role != Role.OWNER:
        raise Http404("No such project.")
    return access.project


@never_cache
@login_required
def project_audit(request, project_id: int):
    """The project's entries, newest first, filtered by action and actor, a page at a time;
    `?format=csv` or `json` downloads every entry the filters select."""
    project = _owned(request, project_id)
    action = request.GET.get("action", "")
    actor = request.GET.get("actor", "").strip()
    entries = audit_entry_list(project_id=project.pk, action=action, actor=actor)
    fmt = request.GET.get("format", "")
    if fmt:
        if fmt not in EXPORT_FORMATS:
            raise Http404("Download as csv or json.")
        return audit_export_response(
            entries=entries,
            fmt=fmt,
            actor=audit_actor(request),
            project=project,
            filters={"action": action, "actor": actor},
        )
    page = Paginator(entries, PAGE_SIZE).get_page(request.GET.get("page"))
    filters = request.GET.copy()
    filters.pop("page", None)
    context = {
        "project": project,
        "page": page,
        "actions": AuditAction.choices,
        "action": action,
        "actor": actor,
        "filters": filters.urlencode(),
        "kinds": dict(AuditEntry.ActorKind.choices),
    }
    return render(request, "project_audit.html", context)
