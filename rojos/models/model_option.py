"""A model a rojo offers besides its default, with what is known of it: the per-model half
of a rojo (its window, prices, calibration and quirks).

The rojo's own row holds the same fields for its default model (`Rojo.model`), so a rojo
that offers one model is what it always was; a row here holds them for each other model.
Rows are made by an administrator (an offered model) or, for a rojo that offers any model
its provider lists, the first time a conversation uses one (not offered by itself: it only
keeps what was learned). rojos.context.model_choice reads both through one view.
"""

from django.core.validators import MinValueValidator
from django.db import models

from .rojo import Rojo


class ModelOption(models.Model):
    """One model of a rojo other than its default, and what is per model."""

    rojo = models.ForeignKey(Rojo, on_delete=models.CASCADE, related_name="model_options")
    name = models.CharField(max_length=200, help_text="The model's name, as the provider knows it.")
    offered = models.BooleanField(
        default=True,
        help_text="People may pick it for a conversation (else it only keeps what was learned).",
    )
    context_window = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1024)],
        help_text="Its context window in tokens. Empty: as the provider lists it, else 32,768.",
    )
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
    # Learned at run time, as on the rojo for its default model.
    stream_usage_refused = models.BooleanField(default=False, editable=False)
    chars_per_token = models.FloatField(null=True, blank=True, editable=False)
    listed_window = models.PositiveIntegerField(null=True, blank=True, editable=False)
    refused_window = models.PositiveIntegerField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["rojo_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["rojo", "name"], name="one_option_per_rojo_and_model"),
        ]

    def __str__(self) -> str:
        return self.name
