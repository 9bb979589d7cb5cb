"""What each model response used, and the budgets on it (rojos.models registers them)."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from roject.models import Project


class UsageRecord(models.Model):
    """What one model response used: its tokens (and cost), for the report and the budgets.

    One row per response, reply or summary, finished or not (stopped, cut, failed);
    `reported` is False when the provider gave no usage and the figures are the app's own
    estimate. `message` is the response's message, or the user message of its turn when it
    left none.
    """

    class Kind(models.TextChoices):
        REPLY = "reply"
        SUMMARY = "summary"

    created = models.DateTimeField(default=timezone.now)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    project = models.ForeignKey(Project, on_delete=models.SET_NULL, null=True, blank=True)
    rojo = models.ForeignKey("rojos.Rojo", on_delete=models.SET_NULL, null=True, blank=True)
    conversation = models.ForeignKey(
        "rojos.Conversation",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="usage",
    )
    message = models.ForeignKey(
        "rojos.Message",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="usage_records",
    )
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.REPLY)
    model = models.CharField(max_length=200, blank=True, help_text="The model that answered.")
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
            # The admin's usage: its pages newest first and its report's days. Without it,
            # every record ever made read and sorted at each view.
            models.Index(fields=["created"], name="usagerecord_created"),
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
