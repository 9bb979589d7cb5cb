import json
from datetime import date, timedelta

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.template.response import TemplateResponse
from django.urls import path
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from .branches import branch_count
from .context_window import window_of
from .mcp_admin import RojoMcpServerInline
from .models import (
    Conversation,
    FileChange,
    Message,
    Rojo,
    TurnRecord,
    UsageBudget,
    UsageRecord,
    default_approval_tools,
    default_tools,
)
from .prices import rojo_prices_prefill
from .tools import display_args, registry
from .usage_report import usage_report_csv, usage_report_rows


def _tool_label(tool) -> str:
    summary = tool.description.split(". ")[0].rstrip(".")
    return f"{tool.name}{' (writes)' if tool.writes else ''} — {summary}"


class RojoForm(forms.ModelForm):
    """The API key is write-only: never rendered back; leaving it empty keeps the stored one."""

    api_key = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Leave empty to keep the current key. It is never shown again.",
    )
    clear_api_key = forms.BooleanField(required=False, help_text="Remove the stored key.")
    # A new rojo starts with the model's defaults, as `create_rojo` gives it: a declared field
    # gets no initial value from the model by itself.
    tools = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, choices=(), initial=default_tools
    )
    approval_tools = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        choices=(),
        initial=default_approval_tools,
        label="Ask before",
        help_text="These tools wait for an editor's approval before they change or remove "
        "an existing file (a new file needs no approval).",
    )

    class Meta:
        model = Rojo
        fields = [
            "name",
            "slug",
            "base_url",
            "model",
            "api_key",
            "clear_api_key",
            "api_key_env",
            "system_prompt",
            "temperature",
            "max_steps",
            "context_window",
            "max_output_tokens",
            "price_input",
            "price_cached_input",
            "price_output",
            "tools",
            "approval_tools",
            "request_options",
        ]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tools"].choices = [(tool.name, _tool_label(tool)) for tool in registry]
        self.fields["approval_tools"].choices = [
            (tool.name, tool.name) for tool in registry if tool.writes
        ]

    def clean_request_options(self):
        """An emptied box means no options (the column holds an object, never NULL)."""
        value = self.cleaned_data.get("request_options")
        return {} if value in (None, "") else value

    def save(self, commit=True):
        rojo = super().save(commit=False)
        rojo_prices_prefill(rojo)  # a known model's prices, where none are set
        if {"context_window", "model", "base_url"} & set(self.changed_data):
            # Another window or model: what the old one refused or listed no longer holds.
            rojo.refused_window = rojo.listed_window = None
        new_key = self.cleaned_data.get("api_key")
        if self.cleaned_data.get("clear_api_key"):
            rojo.api_key = ""
        elif not new_key and self.instance.pk:
            rojo.api_key = Rojo.objects.only("api_key").get(pk=self.instance.pk).api_key
        if commit:
            rojo.save()
        return rojo


@admin.register(Rojo)
class RojoAdmin(admin.ModelAdmin):
    form = RojoForm
    inlines = [RojoMcpServerInline]
    list_display = ["name", "slug", "model", "base_url", "has_key", "window_in_use"]
    search_fields = ["name", "slug", "model"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = [
        "window_in_use",
        "listed_window",
        "refused_window",
        "stream_usage_refused",
        "chars_per_token",
    ]

    @admin.display(description="window in use")
    def window_in_use(self, rojo: Rojo) -> str:
        return f"{window_of(rojo):,} tokens"

    @admin.display(boolean=True, description="key set")
    def has_key(self, rojo: Rojo) -> bool:
        return bool(rojo.api_key or rojo.api_key_env)


class ReadOnly:
    """What happened is shown, never edited: no adding, changing or deleting in the admin."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class UndoneFilter(admin.SimpleListFilter):
    """Changes that were undone, or not, in words (the default filter says "Empty / Not empty")."""

    title = "undo"
    parameter_name = "undone"

    def lookups(self, request, model_admin):
        return [("yes", "Undone"), ("no", "Not undone")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(undone__isnull=False)
        if self.value() == "no":
            return queryset.filter(undone__isnull=True)
        return queryset


class MessageInline(ReadOnly, admin.TabularInline):
    """Messages in order, tool calls and results shown as readable JSON; nothing editable."""

    model = Message
    extra = 0
    can_delete = False
    fields = ["branch_number", "position", "role", "text", "calls", "outcome", "created"]
    readonly_fields = fields
    ordering = ["branch", "position"]

    @admin.display(description="branch")
    def branch_number(self, message: Message) -> int:
        return message.branch + 1  # as the chat counts them

    @admin.display(description="content")
    def text(self, message: Message):
        return format_html('<pre class="rojo-admin-text">{}</pre>', message.content or "")

    @admin.display(description="tool calls")
    def calls(self, message: Message):
        if not message.tool_calls:
            return ""
        return format_html_join(
            "",
            '<pre class="rojo-admin-call">⚙ {}({}) · {}</pre>',
            (
                (
                    call["function"]["name"],
                    json.dumps(
                        display_args(call["function"].get("arguments", "")), ensure_ascii=False
                    ),
                    call["id"],
                )
                for call in message.tool_calls
            ),
        )

    @admin.display(description="result")
    def outcome(self, message: Message):
        if message.role != Message.Role.TOOL:
            return ""
        verdict = "error" if message.is_error else "ok"
        return f"{message.name} → {verdict} ({message.tool_call_id})"


class TurnRecordInline(ReadOnly, admin.TabularInline):
    model = TurnRecord
    extra = 0
    can_delete = False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("user_message", "rojo", "user")

    fields = ["user_message", "rojo", "status", "error", "started", "finished"]
    readonly_fields = fields


@admin.register(Conversation)
class ConversationAdmin(ReadOnly, admin.ModelAdmin):
    """Read-only: conversations are what happened; the admin shows them, it does not edit."""

    list_display = ["id", "title", "project", "rojo", "user", "updated"]
    list_select_related = ["project", "rojo", "user"]  # rojo and user may be empty
    list_filter = ["project", "rojo", "user"]
    search_fields = ["title", "messages__content"]
    readonly_fields = ["project", "rojo", "user", "title", "created", "updated", "branch_forks"]
    inlines = [MessageInline, TurnRecordInline]

    class Media:
        css = {"all": ["rojo/admin.css"]}  # long messages and tool calls wrap

    @admin.display(description="branches")
    def branch_forks(self, conversation: Conversation) -> str:
        """Which branch the chat shows, and where each other one forked (1-based)."""
        shown = f"Branch {conversation.branch + 1} of {branch_count(conversation)} is shown."
        forks = [
            f"Branch {f['id'] + 1} replaces message {f['replaced']} (position {f['at']}) "
            f"of branch {f['parent'] + 1}."
            for f in conversation.branches or ()
        ]
        return " ".join([shown, *forks])


@admin.register(FileChange)
class FileChangeAdmin(ReadOnly, admin.ModelAdmin):
    """The change log of each project: what every tool call and person changed, and what was
    undone."""

    list_display = ["created", "project", "origin", "tool", "changed_paths", "conversation"]
    list_display += ["by", "undone"]
    list_select_related = ["project", "author", "conversation__user", "conversation__via_token"]
    list_filter = ["project", "origin", "tool", UndoneFilter]
    search_fields = ["paths", "tool_call_id"]
    readonly_fields = [f.name for f in FileChange._meta.fields]

    @admin.display(description="paths")
    def changed_paths(self, change: FileChange) -> str:
        return ", ".join(change.paths)

    @admin.display(description="by")
    def by(self, change: FileChange) -> str:
        """Who made a change: its author (a person, or the one a rojo ran for), and through
        MCP, the token's user via MCP (the token's name)."""
        conversation = change.conversation
        if conversation is not None and conversation.via_mcp:
            token = conversation.via_token.name if conversation.via_token else "a deleted token"
            return f"{conversation.user} via MCP ({token})"
        who = change.author or (conversation.user if conversation else None)
        return str(who) if who else ""


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
