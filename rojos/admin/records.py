"""The read-only admin of what happened: conversations with their messages and turns, and
the change log of each project's files."""

import json

from django.contrib import admin
from django.utils.html import format_html, format_html_join

from rojos.agent.branches import branch_count

from ..models import Conversation, FileChange, Message, TurnRecord
from ..tools import display_args


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
            '<pre class="rojo-admin-call">{}({}) · {}</pre>',
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
