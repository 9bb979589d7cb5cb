"""A rojo: a configured agent (endpoint, model, prompt, tools) and what was learned of it."""

from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from rojos.models.capabilities import Capabilities, capabilities_for
from rojos.models.key_sources import key_env_refusal, key_env_value

# The rojo `manage.py demo` (make run) makes from ROJO_BASE_URL, ROJO_MODEL and ROJO_API_KEY.
DEMO_SLUG = "demo"


def validate_base_url(value: str) -> None:
    """An http(s) URL with a host; single-label hosts (a container's name) are fine.

    Members see a rojo's URL (GET /api/rojos), so it must not carry credentials, in its
    user part or its query (where the SDK would break every request's path anyway).
    """
    try:
        parts = urlsplit(value)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:
        valid = False
    if not valid:
        raise ValidationError(f"{value!r} is not an http(s) URL such as https://api.openai.com/v1")
    if parts.username or parts.password:  # not repeated: it is a secret
        raise ValidationError(
            "the URL holds a user name or password, which every user of the app can see; "
            "put the key in the rojo's API key setting instead"
        )
    if parts.query or parts.fragment:  # not repeated either: a gateway's key may be there
        raise ValidationError(
            "the URL holds a query, which every user of the app can see and the SDK would "
            "put before each request's path; put a key in the rojo's API key setting, and "
            "other parameters in its request options"
        )


def validate_request_options(value) -> None:
    """Merged into every request body, so an object of parameters, nothing else."""
    if not isinstance(value, dict):
        raise ValidationError(
            'request options must be a JSON object, such as {"reasoning_effort": "low"}'
        )


def default_approval_tools() -> list[str]:
    """Deleting, moving and overwriting existing files waits for approval unless turned off.

    Edits do not ask by default, though one may replace a whole file: each shows its diff
    and can be undone, and asking before every edit would make the rojo tiring to use. A
    rojo that should ask lists edit_text_content too.
    """
    return ["write_text_content", "move_path", "delete_path"]


def default_instruction_files() -> list[str]:
    """The name most agents read for a project's standing instructions."""
    return ["AGENTS.md"]


def validate_instruction_files(value) -> None:
    """A list of plain file names: each is looked for in the root and in folders entered."""
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise ValidationError('instruction files must be a list of names, such as ["AGENTS.md"]')
    for name in value:
        if not name or name in (".", "..") or "/" in name or "\\" in name or len(name) > 100:
            raise ValidationError(
                f"{name!r} is not a plain file name such as AGENTS.md (no folders, at most "
                "100 characters)"
            )


def default_tools() -> list[str]:
    from ..tools import BUILTIN_TOOLS

    return [tool.name for tool in BUILTIN_TOOLS if tool.default_enabled]


class Rojo(models.Model):
    """An LLM agent: an OpenAI-compatible endpoint, a model, a prompt and the tools it may use."""

    class ReasoningEffort(models.TextChoices):
        NONE = "none", "none"
        MINIMAL = "minimal", "minimal"
        LOW = "low", "low"
        MEDIUM = "medium", "medium"
        HIGH = "high", "high"

    class ReasoningBack(models.TextChoices):
        """Whether a reply's reasoning goes back to the model within its tool loop."""

        AUTO = "auto", "as the provider needs (by the shape it streams; see docs/providers.md)"
        TOOL_LOOP = "tool_loop", "within a tool loop (gpt-oss on vLLM, Qwen3 on llama.cpp)"
        NEVER = "never", "never"

    class Images(models.TextChoices):
        """Whether the rojo's models take images (rojos/provider/images.py)."""

        AUTO = "auto", "as its self-test found, per model"
        YES = "yes", "yes, every model it offers"
        NO = "no", "no"

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=200, unique=True)
    base_url = models.CharField(
        max_length=500,
        validators=[validate_base_url],
        help_text="OpenAI-compatible endpoint, e.g. https://api.openai.com/v1",
    )
    model = models.CharField(
        max_length=200,
        help_text="The default model; others people may pick are its Model options.",
    )
    any_listed_model = models.BooleanField(
        default=False,
        help_text="People may also pick any model the provider lists (its /models), "
        "refreshed from the chat's rojo bar.",
    )
    # The provider's model list as last fetched (rojos.context.model_listing), for the picker.
    provider_models = models.JSONField(default=list, blank=True, editable=False)
    provider_models_fetched = models.DateTimeField(null=True, blank=True, editable=False)
    api_key = models.CharField(
        max_length=500, blank=True, help_text="Stored on the server; never shown again."
    )
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        help_text="Or: the name of an environment variable that holds the key.",
    )
    system_prompt = models.TextField(blank=True)
    temperature = models.FloatField(null=True, blank=True)
    max_steps = models.PositiveIntegerField(
        default=12,
        validators=[MinValueValidator(1)],
        help_text="Model calls per user message before the turn is stopped.",
    )
    tools = models.JSONField(default=default_tools, blank=True)
    approval_tools = models.JSONField(
        default=default_approval_tools,
        blank=True,
        help_text="Tools that wait for a person's approval before changing an existing file.",
    )
    instruction_files = models.JSONField(
        default=default_instruction_files,
        blank=True,
        validators=[validate_instruction_files],
        help_text="Files of standing instructions the rojo reads: in the project's root on "
        "every request, in a folder once it reads or writes there.",
    )
    reasoning_effort = models.CharField(
        max_length=10,
        blank=True,
        choices=ReasoningEffort.choices,
        help_text="Sent as reasoning_effort to a reasoning model. Empty: not sent (the "
        "model's default). Request options that set reasoning_effort or reasoning win.",
    )
    reasoning_back = models.CharField(
        max_length=10,
        choices=ReasoningBack.choices,
        default=ReasoningBack.AUTO,
        help_text="Whether the model's reasoning is sent back with its tool calls: some "
        "models need it within the tool loop (gpt-oss), DeepSeek after it too, Mistral "
        "refuses it.",
    )
    images = models.CharField(
        max_length=4,
        choices=Images.choices,
        default=Images.AUTO,
        help_text="Whether images attached to a message are sent to the model. Auto: to a "
        "model whose provider self-test found it takes images; others refuse a message "
        "with images before asking the provider.",
    )
    request_options = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_request_options],
        help_text="JSON merged into each request, for provider-specific parameters.",
    )
    context_window = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1024)],
        help_text="The model's context window in tokens. Empty: as the provider lists it, "
        "else 32,768.",
    )
    max_output_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(16)],
        help_text="Tokens kept free for each reply. Empty: a quarter of the window, at most 4,096.",
    )
    # US dollars per million tokens: prefilled from the price table for known models.
    price_input = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        help_text="$ per million input tokens.",
    )
    price_cached_input = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        help_text="$ per million cached input tokens (empty: the input price).",
    )
    price_output = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        help_text="$ per million output tokens.",
    )
    # Learned from the provider at run time; shown in the admin, never typed in.
    stream_usage_refused = models.BooleanField(
        default=False,
        editable=False,
        help_text="The provider refused stream_options, so usage is estimated, not reported.",
    )
    chars_per_token = models.FloatField(
        null=True,
        blank=True,
        editable=False,
        help_text="Characters per token, calibrated from the usage the provider reported.",
    )
    listed_window = models.PositiveIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="The window the provider lists for the model (its model list, /props, "
        "/api/show).",
    )
    refused_window = models.PositiveIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="The window the provider stated when it refused a prompt as too long; "
        "it caps the others until the window or model is changed.",
    )
    capability_profiles = models.JSONField(
        default=dict,
        blank=True,
        editable=False,
        help_text="What the provider self-test found each model does, by model name "
        "(rojos.selftest; read through rojos.models.capabilities).",
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors = {}
        if (
            self.context_window
            and self.max_output_tokens
            and self.max_output_tokens >= self.context_window // 2
        ):
            errors["max_output_tokens"] = "must be less than half of the context window"
        refusal = key_env_refusal(self.api_key_env)
        if refusal:
            errors["api_key_env"] = refusal
        if errors:
            raise ValidationError(errors)

    def resolved_api_key(self) -> str:
        """The key to send: the stored one, else the named environment variable's value.

        A key variable the rule refuses (rojos.models.key_sources) raises RojoKeyRefused even when a
        key is stored: the rojo is misconfigured, and clearing its stored key must not start
        sending that variable.
        """
        env_key = key_env_value(self.api_key_env)
        return self.api_key or env_key

    def capabilities(self, model: str | None = None) -> Capabilities:
        """What the provider self-test found `model` (default: the rojo's own) does."""
        return capabilities_for(self, model)
