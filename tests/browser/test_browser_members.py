"""The Members page in a real Chromium: an owner adds a member, changes their role, removes
them, and makes an invitation link that a visitor, in a browser of their own, signs up with."""

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from roject.models import Membership, Role
from tests.conftest import make_user
from tests.support.browser import screenshot
from tests.support.helpers import audited

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_owner_manages_members_and_a_visitor_joins_by_link(page_for, users, project):
    make_user("<script>alert(1)</script>")
    page = page_for(users["owner"])
    page.goto(f"/projects/{project.pk}/")
    page.get_by_role("link", name="Members").click()
    expect(page.get_by_role("heading", name="Members")).to_be_visible()

    page.get_by_label("Username or email").fill("<script>alert(1)</script>")
    page.locator(".member-add").get_by_label("Role").select_option("viewer")
    page.get_by_role("button", name="Add member").click()
    expect(page.get_by_role("status")).to_contain_text("<script>alert(1)</script> is now a member")
    evil = get_user_model().objects.get(username="<script>alert(1)</script>")
    row = page.locator(f'tr[data-member="{evil.pk}"]')
    expect(row.locator(".member-name")).to_have_text("<script>alert(1)</script>")

    row.get_by_label("Role of <script>alert(1)</script>").select_option("editor")
    row.get_by_role("button", name="Change role").click()
    expect(page.get_by_role("status")).to_contain_text("is now editor")
    assert Membership.objects.get(project=project, user=evil).role == Role.EDITOR

    owner_row = page.locator(f'tr[data-member="{users["owner"].pk}"]')
    owner_row.get_by_role("button", name="Remove").click()
    expect(page.get_by_role("alert")).to_have_text(
        "A project needs an owner: make someone else an owner first."
    )

    page.locator(f'tr[data-member="{evil.pk}"]').get_by_role("button", name="Remove").click()
    expect(page.get_by_role("status")).to_contain_text("The member was removed.")
    expect(page.locator(f'tr[data-member="{evil.pk}"]')).to_have_count(0)

    page.locator("#id_invite_role").select_option("editor")
    page.get_by_label("Email (optional)").fill("erin@example.com")
    page.get_by_role("button", name="Create invitation link").click()
    link = page.get_by_label("The invitation link").input_value()
    expect(page.locator(".invitation-list tbody tr")).to_contain_text("erin@example.com")
    screenshot(page, "members")
    page.reload()
    expect(page.get_by_label("The invitation link")).to_have_count(0)

    visitor = page_for()  # a browser context of its own, logged in as nobody
    visitor.goto(link)
    expect(visitor.locator(".invitation-project")).to_have_text("Demo Project")
    visitor.get_by_label("Username").fill("erin")
    visitor.get_by_label("Password", exact=True).fill("correct horse battery 42")
    visitor.get_by_label("Password again").fill("correct horse battery 42")
    visitor.get_by_role("button", name="Create account and join").click()
    expect(visitor).to_have_url(f"{page.url.split('/projects/')[0]}/projects/{project.pk}/")
    expect(visitor.locator(".project-title .role")).to_have_text("editor")

    visitor.goto(link)  # single use
    expect(visitor.get_by_role("alert")).to_contain_text("used already")

    page.reload()
    expect(page.locator(".member-list")).to_contain_text("erin")
    expect(page.locator(".invitation-list")).to_contain_text("No pending invitations.")
    actions = list(audited().order_by("id").values_list("action", flat=True))
    assert actions == [
        "member_added",
        "member_role_changed",
        "member_removed",
        "invitation_created",
        "invitation_accepted",
    ]
    assert page.dialogs == [] and visitor.dialogs == []  # the <script> name never ran
    # The refusals are pages with a 4xx status, which Chromium logs; nothing else went wrong.
    assert len(page.console_errors) == 1 and "status of 400" in page.console_errors[0]
    assert len(visitor.console_errors) == 1 and "status of 410" in visitor.console_errors[0]


def test_a_viewer_sees_the_members_read_only(page_for, users, project):
    page = page_for(users["viewer"])
    page.goto(f"/projects/{project.pk}/members/")
    expect(page.locator(".member-list tbody tr")).to_have_count(3)
    expect(page.get_by_role("note")).to_contain_text("Only the project's owners")
    expect(page.get_by_role("button", name="Remove")).to_have_count(0)
    expect(page.get_by_role("button", name="Add member")).to_have_count(0)
