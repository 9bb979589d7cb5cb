"""The rojo's admin form: the API key write-only (never rendered back; an empty box keeps
it, a move to another endpoint drops it), the tools chosen from the registry, the
instruction files typed as one line, and what a save changed, for its audit entry."""

from django import forms

from rojos.context.prices import rojo_prices_prefill
from rojos.models.key_sources import KEY_ENV_RULE, endpoint_moved

from ..models import (
    Rojo,
    default_approval_tools,
    default_instruction_files,
    default_tools,
    validate_instruction_files,
)
from ..tools import registry


def _tool_label(tool) -> str:
    summary = tool.description.split(". ")[0].rstrip(".")
    return f"{tool.name}{' (writes)' if tool.writes else ''} — {summary}"


class NameListField(forms.CharField):
    """A list of file names typed as one line, separated by commas."""

    def prepare_value(self, value):
        return ", ".join(value) if isinstance(value, list) else value

    def to_python(self, value) -> list[str]:
        text = super().to_python(value)
        names = [name.strip() for name in text.split(",") if name.strip()]
        validate_instruction_files(names)
        return names


class RojoForm(forms.ModelForm):
    """The API key is write-only: never rendered back; leaving it empty keeps the stored one,
    unless the base URL moves to another scheme, host or port (rojos.models.key_sources)."""

    api_key = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Leave empty to keep the current key. It is never shown again. A base URL "
        "with another scheme, host or port removes the stored key unless you enter one here.",
    )
    clear_api_key = forms.BooleanField(required=False, help_text="Remove the stored key.")
    confirm_key_env_host = forms.BooleanField(
        required=False,
        label="Send the env key to the new host",
        help_text="Needed when the base URL moves to another scheme, host or port while the "
        "key comes from API key env: that variable's key will be sent there.",
    )
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

    instruction_files = NameListField(
        required=False,
        initial=default_instruction_files,
        help_text="File names, separated by commas (AGENTS.md, CLAUDE.md): standing "
        "instructions read from the project's root on every request, and from a folder once "
        "the rojo reads or writes there. Empty: none.",
    )

    class Meta:
        model = Rojo
        fields = [
            "name",
            "slug",
            "base_url",
            "model",
            "any_listed_model",
            "api_key",
            "clear_api_key",
            "api_key_env",
            "confirm_key_env_host",
            "system_prompt",
            "temperature",
            "reasoning_effort",
            "reasoning_back",
            "images",
            "max_steps",
            "context_window",
            "max_output_tokens",
            "price_input",
            "price_cached_input",
            "price_output",
            "tools",
            "approval_tools",
            "instruction_files",
            "request_options",
        ]
        help_texts = {
            "api_key_env": f"Or: the name of an environment variable that holds the key; "
            f"{KEY_ENV_RULE}.",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in ("reasoning_back", "images"):
            if name in self.fields:  # not for staff who may only view rojos
                self.fields[name].required = False
        self.fields["tools"].choices = [
            (tool.name, _tool_label(tool))
            for tool in registry
            if not tool.reads_kept_results  # offered by the conversation, not chosen
        ]
        self.fields["approval_tools"].choices = [
            (tool.name, tool.name) for tool in registry if tool.writes
        ]

    def clean_reasoning_back(self):
        """A form that leaves it out (an older script posting the admin) keeps the default."""
        return self.cleaned_data.get("reasoning_back") or Rojo.ReasoningBack.AUTO

    def clean_images(self):
        """A form that leaves it out (an older script posting the admin) keeps the rojo's."""
        return self.cleaned_data.get("images") or self.instance.images or Rojo.Images.AUTO

    def clean_request_options(self):
        """An emptied box means no options (the column holds an object, never NULL)."""
        value = self.cleaned_data.get("request_options")
        return {} if value in (None, "") else value

    def clean(self):
        """An endpoint move with the key from the environment asks for a tick: the key goes
        to the new host, where a stored key would have been removed."""
        cleaned = super().clean()
        if (
            self._stored is not None
            and cleaned.get("base_url")
            and endpoint_moved(self._stored.base_url, cleaned["base_url"])
            and cleaned.get("api_key_env")
            and not cleaned.get("api_key")
            and not cleaned.get("confirm_key_env_host")
        ):
            self.add_error(
                "confirm_key_env_host",
                "The base URL moves to another scheme, host or port: tick this to send the "
                f"key in {cleaned['api_key_env']} there, or enter a key for it above.",
            )
        return cleaned

    @property
    def _stored(self) -> Rojo | None:
        """The rojo as stored before this save (None for a new one)."""
        if not self.instance.pk:
            return None
        if not hasattr(self, "_stored_row"):
            self._stored_row = Rojo.objects.only("api_key", "base_url").get(pk=self.instance.pk)
        return self._stored_row

    def save(self, commit=True):
        rojo = super().save(commit=False)
        rojo_prices_prefill(rojo)  # a known model's prices, where none are set
        if {"context_window", "model", "base_url"} & set(self.changed_data):
            # Another window or model: what the old one refused or listed no longer holds.
            rojo.refused_window = rojo.listed_window = None
        if "base_url" in self.changed_data:
            rojo.capability_profiles = {}  # another provider: its self-tests are to be done
        stored = self._stored
        self.key_dropped = False
        if self.cleaned_data.get("clear_api_key"):
            rojo.api_key = ""
        elif self.cleaned_data.get("api_key") or stored is None:
            pass  # the new key (or none, for a new rojo) is on the instance already
        elif endpoint_moved(stored.base_url, rojo.base_url):
            # The stored key belongs to the old endpoint: never send it to another one.
            rojo.api_key = ""
            self.key_dropped = bool(stored.api_key)
        else:
            rojo.api_key = stored.api_key
        if commit:
            rojo.save()
        return rojo

    def values_before(self, fields: list[str]) -> dict:
        return {name: self.get_initial_for_field(self.fields[name], name) for name in fields}

    def audited_fields(self) -> list[str]:
        """The fields this save changes: the key only when one was given or cleared (its
        empty box says nothing about the stored key)."""
        form_only = ("api_key", "clear_api_key", "confirm_key_env_host")
        fields = [f for f in self.changed_data if f not in form_only]
        if (
            self.cleaned_data.get("api_key")
            or self.cleaned_data.get("clear_api_key")
            or getattr(self, "key_dropped", False)
        ):
            fields.append("api_key")
        return fields
