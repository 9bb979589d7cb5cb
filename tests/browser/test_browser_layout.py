"""The header and the page width as a person sees them: an owner's project header at desktop
widths (the name on one line, every link in its column, clear of the chat bar) and every main
page on a phone (no sideways scrolling, Log out on screen)."""

import pytest
from playwright.sync_api import expect

from roject.identity.tokens import api_token_create
from tests.support.browser import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def inside(box: dict, frame: dict) -> bool:
    """`box` lies wholly within `frame` (half a pixel of rounding allowed)."""
    return (
        box["x"] >= frame["x"] - 0.5
        and box["y"] >= frame["y"] - 0.5
        and box["x"] + box["width"] <= frame["x"] + frame["width"] + 0.5
        and box["y"] + box["height"] <= frame["y"] + frame["height"] + 0.5
    )


def overlap(a: dict, b: dict) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


def boxes(locator) -> list[tuple[str, dict]]:
    return [(item.inner_text(), item.bounding_box()) for item in locator.all()]


@pytest.mark.parametrize("width", [1280, 1440, 1920])
def test_an_owners_project_header_fits_at_desktop_widths(page_for, users, project, width):
    """The project's name reads on one line; the role, Members, Project settings and Audit log
    stay inside the conversations column and clear of the chat's rojo bar; the site header's
    links and buttons are all on screen."""
    page = page_for(users["owner"], width=width, height=900)
    page.goto(f"/projects/{project.pk}/")
    expect(page.get_by_role("link", name="Audit log")).to_be_visible()
    viewport = {"x": 0, "y": 0, "width": width, "height": 900}

    name = page.get_by_role("heading", name="Demo Project")
    box = name.bounding_box()
    font_size = name.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
    assert box["width"] >= 120
    assert box["height"] < 2 * font_size  # one line, not a letter per line
    assert name.evaluate("e => e.scrollWidth <= e.clientWidth")

    column = page.locator("aside.conversations").bounding_box()
    chat_bar = page.locator(".rojo-bar").bounding_box()
    title_links = boxes(page.locator(".project-title a, .project-title .role"))
    assert [text for text, _ in title_links] == [
        "owner",
        "Members",
        "Project settings",
        "Audit log",
    ]
    for text, link in title_links:
        assert inside(link, column), (text, link, column)
        assert inside(link, viewport), (text, link)
        assert not overlap(link, chat_bar), (text, link, chat_bar)

    header = page.locator("header.site-header").bounding_box()
    for text, item in boxes(page.locator("header.site-header :is(a, button):visible")):
        assert inside(item, header), (text, item, header)
        assert inside(item, viewport), (text, item)
    screenshot(page, f"owner-header-{width}")


def main_pages(project) -> list[str]:
    return [
        "/",
        f"/projects/{project.pk}/",
        f"/projects/{project.pk}/members/",
        f"/projects/{project.pk}/settings/",
        f"/projects/{project.pk}/audit/",
        "/tokens/",
        "/approvals/",
    ]


def test_no_page_is_wider_than_a_phone(page_for, users, project):
    """At 390 x 844 no main page scrolls sideways and Log out is on screen, for an owner (who
    has the most header links) and a token in the tokens page's wide table."""
    api_token_create(user=users["owner"], name="a laptop agent with a long name")
    page = page_for(users["owner"], width=390, height=844)
    viewport = {"x": 0, "y": 0, "width": 390, "height": 844}
    for url in main_pages(project):
        page.goto(url)
        log_out = page.get_by_role("button", name="Log out")
        expect(log_out).to_be_visible()
        assert page.evaluate("document.scrollingElement.scrollWidth") <= 390, url
        assert inside(log_out.bounding_box(), viewport), url
        screenshot(page, f"phone{url.replace('/', '-').rstrip('-')}")

    login = page_for(width=390, height=844)
    login.goto("/login/")
    expect(login.get_by_role("button", name="Log in")).to_be_visible()
    assert login.evaluate("document.scrollingElement.scrollWidth") <= 390
