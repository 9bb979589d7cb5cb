"""Single sign-on in a real Chromium against a real OpenID Connect provider (django-oauth-
toolkit in its own process): the login page's button, the provider's login page, back
logged in with the mapped role; logout ends both sessions."""

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from roject.members.projects import project_create
from roject.models import AuditAction, AuditEntry, Membership, Role
from tests.conftest import make_user
from tests.support.browser import screenshot
from tests.support.oidc_server import USERS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def provider_login(page, oidc, username: str, *, consent: str = "Authorize") -> None:
    """Fill the provider's own login page, which must be the one showing; answer its consent
    page, if it asks (until the user has allowed the app once), with the button `consent`."""
    assert page.url.startswith(f"{oidc.base_url}/accounts/login/"), page.url
    page.get_by_label("Provider username").fill(username)
    page.get_by_label("Provider password").fill(USERS[username]["password"])
    page.get_by_role("button", name="Sign in to the provider").click()
    page.wait_for_url(lambda url: not url.startswith(f"{oidc.base_url}/accounts/login/"))
    if page.url.startswith(f"{oidc.base_url}/o/authorize/"):
        expect(page.get_by_role("heading", name="Authorize Rojo Chat?")).to_be_visible()
        page.get_by_role("button", name=consent).click()


def test_sign_in_with_the_provider_then_log_out_of_both(page_for, oidc, asgi_server):
    docs = project_create(name="Docs", owner=make_user("docs-owner"))
    page = page_for()
    missing = []
    page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    page.goto("/")
    expect(page.get_by_label("Username")).to_be_visible()  # the password form stays beside it
    screenshot(page, "oidc-login-page")
    page.get_by_role("link", name="Sign in with Test provider").click()
    page.wait_for_url(f"{oidc.base_url}/accounts/login/**")
    provider_login(page, oidc, "alice")

    page.wait_for_url(f"{asgi_server}/")
    expect(page.get_by_role("heading", name="Your projects")).to_be_visible()
    row = page.locator(".project-list li", has_text="Docs")
    expect(row.locator(".role")).to_have_text("Editor")
    alice = get_user_model().objects.get(username="alice")
    assert Membership.objects.get(user=alice, project=docs).role == Role.EDITOR
    screenshot(page, "oidc-signed-in")

    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(f"{asgi_server}/login/")
    expect(page.get_by_role("link", name="Sign in with Test provider")).to_be_visible()
    # The test provider serves no favicon; the app's pages miss nothing.
    assert [url for url in missing if not url.startswith(oidc.base_url)] == []

    # The provider's session ended too: signing in again asks for the password.
    page.get_by_role("link", name="Sign in with Test provider").click()
    page.wait_for_url(f"{oidc.base_url}/accounts/login/**")
    provider_login(page, oidc, "alice")
    page.wait_for_url(f"{asgi_server}/")
    actions = list(AuditEntry.objects.order_by("pk").values_list("action", flat=True))
    assert actions == [
        AuditAction.MEMBER_ADDED,
        AuditAction.LOGIN,
        AuditAction.LOGOUT,
        AuditAction.LOGIN,
    ]


def test_refusing_consent_at_the_provider_is_a_failed_login(page_for, oidc, asgi_server):
    page = page_for()
    page.goto("/login/")
    page.get_by_role("link", name="Sign in with Test provider").click()
    page.wait_for_url(f"{oidc.base_url}/accounts/login/**")
    provider_login(page, oidc, "erin", consent="Cancel")
    page.wait_for_url(f"{asgi_server}/login/")
    expect(page.get_by_role("alert")).to_have_text(
        "Signing in with Test provider failed. Try again."
    )
    assert not get_user_model().objects.filter(username="erin").exists()
    [failed] = AuditEntry.objects.filter(action=AuditAction.LOGIN_FAILED)
    assert failed.details == {"via": "oidc", "reason": "provider error"}
