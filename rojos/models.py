"""Rojos (configured agents) and the conversations people have with them."""

import os
from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone

from roject.models import Project


def validate_base_url(value: str) -> None:
    """An http(s) URL with a host; single-label hosts (a container's name) are fine.

    Members see a rojo's URL (GET /api/rojos), so it must not carry credentials.
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


def default_tools() -> list[str]:
    from .tools import BUILTIN_TOOLS

    return [tool.name for tool in BUILTIN_TOOLS if tool.default_enabled]


class Rojo(models.Model):
    """An LLM agent: an OpenAI-compatible endpoint, a model, a prompt and the tools it may use."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=200, unique=True)
    base_url = models.CharField(
        max_length=500,
        validators=[validate_base_url],
        help_text="OpenAI-compatible endpoint, e.g. https://api.openai.com/v1",
    )
    model = models.CharField(max_length=200)
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
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if (
            self.context_window
            and self.max_output_tokens
            and self.max_output_tokens >= self.context_window // 2
        ):
            raise ValidationError(
                {"max_output_tokens": "must be less than half of the context window"}
            )

    def resolved_api_key(self) -> str:
        """The key to send: the stored one, else the named environment variable's value."""
        if self.api_key:
            return self.api_key
        if self.api_key_env:
            return os.environ.get(self.api_key_env, "")
        return ""


class ConversationQuerySet(models.QuerySet):
    def running(self):
        """Conversations whose turn is alive: claimed, with a fresh heartbeat."""
        stale = timezone.now() - timedelta(seconds=settings.ROJO_TURN_STALE_SECONDS)
        return self.filter(turn_id__isnull=False, turn_heartbeat__gte=stale)


class Conversation(models.Model):
    """A thread of messages between project members and one rojo."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="conversations")
    rojo = models.ForeignKey(
        Rojo, on_delete=models.SET_NULL, null=True, blank=True, related_name="conversations"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="conversations",
    )
    title = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    # The running turn, if any: claimed with a conditional UPDATE so that only one turn runs
    # per conversation across every server process; a stale heartbeat frees a crashed claim.
    turn_id = models.UUIDField(null=True, blank=True, editable=False)
    turn_heartbeat = models.DateTimeField(null=True, blank=True, editable=False)

    objects = ConversationQuerySet.as_manager()

    class Meta:
        ordering = ["-updated"]
        indexes = [models.Index(fields=["project", "-updated"])]

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"

    @property
    def running(self) -> bool:
        """Whether a turn is alive here; a crashed one stops counting once its claim is stale."""
        if self.turn_id is None or self.turn_heartbeat is None:
            return False
        stale = timezone.now() - timedelta(seconds=settings.ROJO_TURN_STALE_SECONDS)
        return self.turn_heartbeat >= stale


class Message(models.Model):
    """One message in the OpenAI chat format, so the history is sent back as stored."""

    class Role(models.TextChoices):
        SYSTEM = "system"
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"
        # A summary of the turns before `extra["until"]` (a position), which requests send
        # in their stead once the conversation outgrew the model's window; never sent as is.
        SUMMARY = "summary"

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    position = models.PositiveIntegerField()
    role = models.CharField(max_length=10, choices=Role.choices)
    # null, as in the OpenAI format, for an assistant message that only calls tools.
    content = models.TextField(null=True, blank=True)  # noqa: DJ001
    # Assistant: [{"id", "type": "function", "function": {"name", "arguments"}, ...extra}].
    tool_calls = models.JSONField(null=True, blank=True)
    # Tool: which call this answers, the tool's name and whether it failed.
    tool_call_id = models.CharField(max_length=200, blank=True)
    name = models.CharField(max_length=64, blank=True)
    is_error = models.BooleanField(default=False)
    # Reasoning text some models stream; kept to show, never sent back.
    reasoning = models.TextField(blank=True)
    # Fields a provider added that the app does not know, kept verbatim.
    extra = models.JSONField(default=dict, blank=True)
    usage = models.JSONField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["conversation_id", "position"]  # the column: ordering by the relation joins
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "position"], name="unique_message_position"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.role} #{self.position}"


class TurnRecord(models.Model):
    """How one turn ended: kept so replays and exports can show errors, which no message holds."""

    class Status(models.TextChoices):
        RUNNING = "running"
        DONE = "done"
        ERROR = "error"
        STOPPED = "stopped"
        INTERRUPTED = "interrupted"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="turns")
    user_message = models.OneToOneField(
        Message, on_delete=models.CASCADE, related_name="turn_record"
    )
    rojo = models.ForeignKey(Rojo, on_delete=models.SET_NULL, null=True, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.RUNNING)
    error = models.TextField(blank=True)
    error_code = models.CharField(max_length=20, blank=True)
    started = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["conversation_id", "started"]
        indexes = [models.Index(fields=["user", "-started"])]

    def __str__(self) -> str:
        return f"turn of message {self.user_message_id} ({self.status})"


class FileChange(models.Model):
    """One tool call's change to a project's files, with what is needed to reverse it.

    The previous state of each changed path is copied to storage/<project>/undo/<key>/,
    outside the project root; `after` holds a digest of each path as the call left it,
    so an undo can tell whether the file changed since and refuse rather than lose work.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="file_changes")
    conversation = models.ForeignKey(
        Conversation, on_delete=models.SET_NULL, null=True, blank=True, related_name="changes"
    )
    message = models.ForeignKey(
        Message, on_delete=models.SET_NULL, null=True, blank=True, related_name="changes"
    )
    tool_call_id = models.CharField(max_length=200, blank=True)
    tool = models.CharField(max_length=64)
    paths = models.JSONField(help_text="The changed paths, relative to the project root.")
    before = models.JSONField(help_text="Per path: whether it existed before the call.")
    after = models.JSONField(
        null=True,
        help_text="Per path: a digest of its state after the call. Empty while a call that "
        "may replace something runs (its record is stored before it, for undo after a crash).",
    )
    created_parents = models.JSONField(
        default=list,
        blank=True,
        help_text="Directories the call created on the way; an undo removes them when empty.",
    )
    key = models.CharField(max_length=64, unique=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    undone = models.DateTimeField(null=True, blank=True)
    undone_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["conversation", "tool_call_id"])]

    def __str__(self) -> str:
        return f"{self.tool} {', '.join(self.paths)}"


class UsageRecord(models.Model):
    """What one model response used: its tokens (and cost), for the report and the budgets.

    One row per response, reply or summary; `reported` is False when the provider gave no
    usage and the figures are the app's own estimate.
    """

    class Kind(models.TextChoices):
        REPLY = "reply"
        SUMMARY = "summary"

    created = models.DateTimeField(default=timezone.now)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    project = models.ForeignKey(Project, on_delete=models.SET_NULL, null=True, blank=True)
    rojo = models.ForeignKey(Rojo, on_delete=models.SET_NULL, null=True, blank=True)
    conversation = models.ForeignKey(
        Conversation, on_delete=models.SET_NULL, null=True, blank=True, related_name="usage"
    )
    message = models.ForeignKey(
        Message, on_delete=models.SET_NULL, null=True, blank=True, related_name="usage_records"
    )
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.REPLY)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cached_tokens = models.PositiveIntegerField(default=0)
    reasoning_tokens = models.PositiveIntegerField(default=0)
    reported = models.BooleanField(default=True)
    cost = models.DecimalField(
        max_digits=14, decimal_places=8, null=True, blank=True, help_text="US dollars."
    )

    class Meta:
        ordering = ["-created"]
        indexes = [
            models.Index(fields=["user", "created"]),
            models.Index(fields=["project", "created"]),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.prompt_tokens}+{self.completion_tokens} tokens"

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class UsageBudget(models.Model):
    """A user's or a project's daily or monthly budget of tokens or cost.

    It replaces the settings' default (ROJO_USER_DAILY_TOKENS and the like) for that user or
    project and period; one with neither limit set exempts them.
    """

    class Period(models.TextChoices):
        DAY = "day"
        MONTH = "month"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True
    )
    project = models.ForeignKey(Project, on_delete=models.CASCADE, null=True, blank=True)
    period = models.CharField(max_length=5, choices=Period.choices)
    max_tokens = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Prompt and completion tokens; empty: no limit."
    )
    max_cost = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        help_text="US dollars; empty: no limit.",
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(user__isnull=True) ^ models.Q(project__isnull=True),
                name="budget_of_a_user_or_a_project",
            ),
            models.UniqueConstraint(fields=["user", "period"], name="one_budget_per_user_period"),
            models.UniqueConstraint(
                fields=["project", "period"], name="one_budget_per_project_period"
            ),
        ]

    def __str__(self) -> str:
        adjective = "daily" if self.period == self.Period.DAY else "monthly"
        return f"{adjective} budget of {self.user or self.project}"
