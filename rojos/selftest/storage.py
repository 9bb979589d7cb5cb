"""Keeping a self-test's profile on the rojo, by model name, and what the loop learns from it.

The profile is read through `rojos.models.capabilities.capabilities_for`. What the app
already learns at run time on the rojo's own row (the listed window, a refused
`stream_options`) is fed from the test too, for the rojo's own model: the next turn starts
with it rather than learning it from a failure.
"""

from django.db import transaction

from rojos.models import Rojo
from rojos.models.capabilities import capabilities_of
from rojos.selftest.results import Profile

# Profiles kept per rojo; past this the oldest go (a rojo tried with many models).
MAX_PROFILES = 20


def profile_store(*, rojo: Rojo, profile: Profile) -> None:
    """(Blocking) Keep `profile` under its model's name; update `rojo` in memory as well."""
    with transaction.atomic():
        row = Rojo.objects.select_for_update().only("model", "capability_profiles").get(pk=rojo.pk)
        profiles = dict(
            row.capability_profiles if isinstance(row.capability_profiles, dict) else {}
        )
        profiles.pop(profile.model, None)
        profiles[profile.model] = profile.as_json()
        while len(profiles) > MAX_PROFILES:
            profiles.pop(min(profiles, key=lambda name: str(profiles[name].get("taken"))))
        changes: dict = {"capability_profiles": profiles}
        if profile.model == row.model:
            found = capabilities_of(profiles[profile.model])
            if found.window:
                changes["listed_window"] = found.window
            if found.refused is not None:  # the options probe could tell
                changes["stream_usage_refused"] = "stream_options" in found.refused
        Rojo.objects.filter(pk=rojo.pk).update(**changes)
    for name, value in changes.items():
        setattr(rojo, name, value)
