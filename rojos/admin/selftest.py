"""The rojo admin's provider self-test: an action that runs it, and the profiles it kept."""

from asgiref.sync import async_to_sync
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from rojos.errors import TurnError
from rojos.models import Rojo
from rojos.selftest.results import Profile

_MARKS = {"works": "✔ works", "does not": "✘ does not", "unknown": "? unknown"}


def profile_html(profile: Profile) -> str:
    """One model's profile as a small table: what works, and why."""
    rows = [(label, _MARKS[result], why) for label, result, why in profile.rows()]
    return format_html(
        "<p><strong>{}</strong> · taken {} · {} requests</p><table><tbody>{}</tbody></table>",
        profile.model,
        profile.taken,
        profile.requests,
        format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", rows),
    )


class SelfTestAdminMixin:
    """The action and the change page's button "Test the provider", and the read-only
    "capability profiles" field."""

    actions = ["provider_selftest"]
    change_form_template = "admin/rojos/rojo_change_form.html"

    def get_urls(self):
        test = self.admin_site.admin_view(self.selftest_view)
        return [
            path("<int:rojo_id>/selftest/", test, name="rojos_rojo_selftest"),
            *super().get_urls(),
        ]

    def selftest_view(self, request, rojo_id: int):
        """The change page's button: test this rojo, then back to its page with the table."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        rojo = get_object_or_404(Rojo, pk=rojo_id)
        if not self.has_change_permission(request, rojo):
            raise PermissionDenied
        self._test(request, rojo)
        return HttpResponseRedirect(reverse("admin:rojos_rojo_change", args=[rojo.pk]))

    @admin.action(description="Test the provider and model (self-test)", permissions=["change"])
    def provider_selftest(self, request, queryset):
        for rojo in queryset[:10]:
            self._test(request, rojo)

    def _test(self, request, rojo: Rojo) -> None:
        # Here, not at the top: the runner brings the provider's SDK (openai, over a second to
        # import), which every management command would pay for through the admin's autodiscovery.
        from rojos.selftest.runner import rojo_selftest_run

        try:
            profile = async_to_sync(rojo_selftest_run)(rojo=rojo)
        except TurnError as exc:  # a misconfigured rojo: said, not raised
            self.message_user(request, f"{rojo}: {exc}", messages.ERROR)
            return
        if profile.verified_nothing:  # said as a warning, not as a pass
            nothing = profile.nothing_verified_text(reason=False)  # the table has each reason
            self.message_user(
                request,
                format_html("{}: {} {}", rojo, nothing, profile_html(profile)),
                messages.WARNING,
            )
            return
        self.message_user(request, format_html("{}: {}", rojo, profile_html(profile)))

    @admin.display(description="capability profiles (self-test)")
    def capability_table(self, rojo: Rojo) -> str:
        profiles = rojo.capability_profiles if isinstance(rojo.capability_profiles, dict) else {}
        if not profiles:
            return "not tested yet: use the button “Test the provider” above"
        return format_html_join(
            "",
            "{}",
            ((profile_html(Profile.from_json(model, data)),) for model, data in profiles.items()),
        )
