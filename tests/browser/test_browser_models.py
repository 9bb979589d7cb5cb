"""A model per conversation in Chromium: the rojo bar's picker, a conversation on each of a
rojo's two models, a regenerate with the other model as a branch named with its model, and the
window meter following the conversation's model."""

import pytest
from playwright.sync_api import expect

from rojos.models import Conversation, ModelOption
from tests.support.accessibility import axe_violations
from tests.support.browser import screenshot
from tests.support.fake_provider import MODEL, stream, text_chunks
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SMALL = "small-model"


@pytest.fixture
def rojo(fake_provider, settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    rojo = make_rojo(fake_provider.base_url, context_window=12_000)
    ModelOption.objects.create(rojo=rojo, name=SMALL, context_window=4_096)
    return rojo


def reply(text: str):
    return stream(*text_chunks(text, pieces=3), delay=0.01)


def send(page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.keyboard.press("Enter")
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()


def test_two_models_a_conversation_each_and_a_regenerate_with_the_other_beside_the_first(
    page_for, users, project, rojo, fake_provider
):
    fake_provider.add(reply("Small hi."), reply("Default hello."), reply("Small hello."))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    picker = page.locator("#model-picker")
    expect(picker.locator("option")).to_have_text([f"{MODEL} (default)", SMALL])
    meter = page.locator(".context-text")

    picker.select_option(SMALL)
    send(page, "Hi?")
    expect(meter).to_contain_text("of 4,096 tokens")
    small = Conversation.objects.get()
    assert small.model == SMALL and fake_provider.models_asked == [SMALL]

    page.goto(f"/projects/{project.pk}/")
    expect(picker).to_have_value(MODEL)
    send(page, "Hello?")
    expect(meter).to_contain_text("of 12,000 tokens")
    panel = page.locator("rojo-chat-panel")
    expect(panel.locator(".reply-model")).to_have_count(0)

    panel.get_by_label("Regenerate with another model").select_option(SMALL)
    expect(panel.locator(".busy")).to_be_hidden()
    expect(panel.locator(".bubble.assistant")).to_have_text([f"{SMALL}Small hello."])
    expect(panel.locator(".bubble.assistant .reply-model")).to_have_text([SMALL])
    expect(panel.locator(".branch-position")).to_have_text("2/2")
    expect(meter).to_contain_text("of 12,000 tokens")  # the conversation kept its model
    assert fake_provider.models_asked == [SMALL, MODEL, SMALL]
    screenshot(page, "models-regenerated")
    assert axe_violations(page) == []  # the picker, the reply's model, Regenerate with

    panel.get_by_role("button", name="Previous version").click()
    expect(panel.locator(".bubble.assistant")).to_have_text(["Default hello."])
    expect(panel.locator(".reply-model")).to_have_count(0)
    panel.get_by_role("button", name="Next version").click()
    expect(panel.locator(".reply-model")).to_have_text([SMALL])

    page.reload()
    expect(page.locator("rojo-chat-panel .reply-model")).to_have_text([SMALL])
    expect(picker).to_have_value(MODEL)
    picker.select_option(SMALL)
    expect(meter).to_contain_text("of 4,096 tokens")
    expect(page.locator("rojo-chat-panel .reply-model")).to_have_count(0)  # now its own model
    conversation = Conversation.objects.exclude(pk=small.pk).get()
    assert conversation.model == SMALL
    assert page.console_errors == []


def test_on_a_phone_the_model_picker_keeps_the_rojo_bar_one_line(page_for, users, project, rojo):
    """At 390 px the picker sits in the rojo bar's one line, named for screen readers, and the
    page does not scroll sideways; More shows Refresh for a rojo offering any listed model."""
    rojo.any_listed_model = True
    rojo.save(update_fields=["any_listed_model"])
    page = page_for(users["editor"], width=390, height=844)
    page.goto(f"/projects/{project.pk}/")
    picker = page.get_by_label("Model", exact=True)
    expect(picker).to_be_visible()
    refresh = page.get_by_role("button", name="Refresh")
    expect(refresh).to_be_hidden()

    bar = page.locator(".rojo-bar")
    assert picker.bounding_box()["y"] < bar.bounding_box()["y"] + 40  # on the bar's first line
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
    page.get_by_role("button", name="More about this rojo and conversation").click()
    expect(refresh).to_be_visible()
    screenshot(page, "models-phone")
    assert page.console_errors == []
