from django import forms
from django.contrib import admin

from .models import Conversation, Message, Rojo
from .tools import registry


class RojoForm(forms.ModelForm):
    """The API key is write-only: never rendered back; leaving it empty keeps the stored one."""

    api_key = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Leave empty to keep the current key. It is never shown again.",
    )
    clear_api_key = forms.BooleanField(required=False, help_text="Remove the stored key.")
    tools = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, choices=()
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
            "tools",
            "request_options",
        ]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tools"].choices = [
            (tool.name, f"{tool.name}{' (writes)' if tool.writes else ''}") for tool in registry
        ]

    def save(self, commit=True):
        rojo = super().save(commit=False)
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
    list_display = ["name", "slug", "model", "base_url", "has_key"]
    search_fields = ["name", "slug", "model"]
    prepopulated_fields = {"slug": ["name"]}

    @admin.display(boolean=True, description="key set")
    def has_key(self, rojo: Rojo) -> bool:
        return bool(rojo.api_key or rojo.api_key_env)


class MessageInline(admin.TabularInline):
    model = Message
    extra = 0
    can_delete = False
    fields = ["position", "role", "content", "tool_calls", "tool_call_id", "is_error"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ["id", "title", "project", "rojo", "user", "updated"]
    list_filter = ["project", "rojo"]
    search_fields = ["title"]
    readonly_fields = ["project", "rojo", "user", "title", "created", "updated"]
    inlines = [MessageInline]

    def has_add_permission(self, request):
        return False
