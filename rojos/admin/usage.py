"""The admin of usage: every model call's tokens and cost, the report per day, budgets."""

from datetime import date, timedelta

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.template.response import TemplateResponse
from django.urls import path
from django.utils import timezone

from rojos.conversations.usage_report import usage_report_csv, usage_report_rows

from ..models import UsageBudget, UsageRecord
from .records import ReadOnly


@admin.register(UsageRecord)
class UsageRecordAdmin(ReadOnly, admin.ModelAdmin):
    """Every model call's tokens and cost; the report sums them per day, user, project, rojo."""

    list_display = ["created", "user", "project", "rojo", "kind", "prompt_tokens", "cached_tokens"]
    list_display += ["completion_tokens", "cost", "reported"]
    list_select_related = ["user", "project", "rojo"]
    list_filter = ["kind", "rojo", "project", "user"]
    date_hierarchy = "created"
    readonly_fields = [f.name for f in UsageRecord._meta.fields]
    change_list_template = "admin/rojos/usagerecord_change_list.html"

    def get_urls(self):
        report = self.admin_site.admin_view(self.report_view)
        return [path("report/", report, name="rojos_usage_report"), *super().get_urls()]

    def report_view(self, request):
        """Tokens and cost per day, user, project and rojo (the last 30 days by default)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        today = timezone.now().date()
        since = _day(request.GET.get("since")) or today - timedelta(days=29)
        until = _day(request.GET.get("until")) or today
        rows = usage_report_rows(since=since, until=until)
        if request.GET.get("format") == "csv":
            response = HttpResponse(usage_report_csv(rows), content_type="text/csv")
            response["Content-Disposition"] = f'attachment; filename="usage-{since}-{until}.csv"'
            return response
        context = {
            **self.admin_site.each_context(request),
            "title": "Usage per day, user, project and rojo",
            "rows": rows,
            "since": since,
            "until": until,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/rojos/usage_report.html", context)


def _day(text: str | None) -> date | None:
    try:
        return date.fromisoformat(text) if text else None
    except ValueError:
        return None


@admin.register(UsageBudget)
class UsageBudgetAdmin(admin.ModelAdmin):
    """Budgets that replace the settings' defaults for one user or one project."""

    list_display = ["__str__", "user", "project", "period", "max_tokens", "max_cost"]
    list_select_related = ["user", "project"]
    list_filter = ["period"]
