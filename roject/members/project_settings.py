"""A project's settings page, for its owners: "changes need approval by an owner".

Each change is audited (PROJECT_CHANGED, one entry per field changed), in the transaction
that saves it; the admin's project form records its changes the same way.
"""

from django import forms
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache

from roject.audit.log import AuditAction, audit_record
from roject.identity.login_limits import client_ip
from roject.members.access import project_access
from roject.models import Project, Role

# The settings an owner changes here, audited by name.
SETTINGS_FIELDS = ["owner_approval"]


class ProjectSettingsForm(forms.Form):
    owner_approval = forms.BooleanField(
        required=False,
        label=Project._meta.get_field("owner_approval").verbose_name.capitalize(),
        help_text=Project._meta.get_field("owner_approval").help_text,
    )


def project_changes_audit(*, project: Project, user, before: dict, address=None) -> None:
    """(Blocking, in the change's transaction) One entry per setting that changed."""
    for field in SETTINGS_FIELDS:
        now = getattr(project, field)
        if before.get(field) != now:
            audit_record(
                action=AuditAction.PROJECT_CHANGED,
                user=user,
                project=project,
                obj=project,
                details={"field": field, "from": before.get(field), "to": now},
                address=address,
            )


def project_settings_values(*, project: Project) -> dict:
    return {field: getattr(project, field) for field in SETTINGS_FIELDS}


def project_settings_change(*, project: Project, user, data: dict, address=None) -> Project:
    """(Blocking) Save the owner's settings and audit what changed; one transaction."""
    before = project_settings_values(project=project)
    with transaction.atomic():
        for field, value in data.items():
            setattr(project, field, value)
        project.save(update_fields=list(data))
        project_changes_audit(project=project, user=user, before=before, address=address)
    return project


@never_cache
@login_required
def project_settings(request, project_id: int):
    """The project's settings; only its owners see this page (404 for anyone else)."""
    access = project_access(user=request.user, project_id=project_id)
    if access.role != Role.OWNER:
        raise Http404("No such project.")
    project = access.project
    form = ProjectSettingsForm(
        request.POST or None, initial=project_settings_values(project=project)
    )
    if request.method == "POST" and form.is_valid():
        project_settings_change(
            project=project,
            user=request.user,
            data={field: form.cleaned_data[field] for field in SETTINGS_FIELDS},
            address=client_ip(request),
        )
        return redirect("project_settings", project_id=project.pk)
    return render(request, "project_settings.html", {"project": project, "form": form})
