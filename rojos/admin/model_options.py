"""The models rojos offer besides their defaults: each with its own window and prices
(prefilled from the price table, like a rojo's), and what was learned of it shown beside.
A page of its own rather than an inline on the rojo's, so a rojo's form stays as it was;
each save is audited as a change of its rojo."""

from django import forms
from django.contrib import admin
from django.db import transaction

from roject.audit.log import AuditAction, audit_actor
from rojos.changes.config_audit import config_audit
from rojos.context.model_choice import ModelInUse, option_prices_prefill
from rojos.context.window import window_of

from ..models import ModelOption


class ModelOptionForm(forms.ModelForm):
    class Meta:
        model = ModelOption
        fields = [
            "rojo",
            "name",
            "offered",
            "context_window",
            "price_input",
            "price_cached_input",
            "price_output",
        ]

    def save(self, commit=True):
        option = super().save(commit=False)
        option_prices_prefill(option)  # a known model's prices, where none are set
        if {"context_window", "name", "rojo"} & set(self.changed_data):
            # Another window or model: what the old one refused or listed no longer holds.
            option.refused_window = option.listed_window = option.chars_per_token = None
        if commit:
            option.save()
        return option


@admin.register(ModelOption)
class ModelOptionAdmin(admin.ModelAdmin):
    """A rojo's other models: people pick among them and its default in the rojo bar."""

    form = ModelOptionForm
    list_display = ["name", "rojo", "offered", "window_in_use", "price_input", "price_output"]
    list_filter = ["rojo", "offered"]
    search_fields = ["name", "rojo__name"]
    readonly_fields = [
        "window_in_use",
        "listed_window",
        "refused_window",
        "stream_usage_refused",
        "chars_per_token",
    ]

    @admin.display(description="window in use")
    def window_in_use(self, option: ModelOption) -> str:
        if option.pk is None:
            return "—"
        return f"{window_of(ModelInUse(option.rojo, option.name, option)):,} tokens"

    def save_model(self, request, obj, form, change):
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            kind = "changed" if change else "added"
            _audit(request, obj, {kind: [obj.name], "fields": sorted(form.changed_data)})

    def delete_model(self, request, obj):
        with transaction.atomic():
            _audit(request, obj, {"removed": [obj.name]})
            super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            for option in queryset:
                _audit(request, option, {"removed": [option.name]})
            super().delete_queryset(request, queryset)


def _audit(request, option: ModelOption, models: dict) -> None:
    """One entry on the option's rojo, like any change to its configuration."""
    details = {"fields": ["models"], "models": models}
    config_audit(
        action=AuditAction.ROJO_CHANGED,
        obj=option.rojo,
        actor=audit_actor(request),
        details=details,
    )
