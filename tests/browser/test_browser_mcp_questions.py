"""A question an MCP server asks mid-call, on the page: its form under the call, answered by
the person whose turn it is, and kept, answered, when the conversation is reopened."""

import pytest
from django.conf import settings as django_settings
from playwright.sync_api import expect

from roject.storage import project_root_create
from rojos.models import Conversation, Message, RojoMcpServer
from tests.mcp.test_mcp_elicitation import asking_server
from tests.support.accessibility import WCAG_AA
from tests.support.browser import screenshot
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def form_violations(page) -> list[str]:
    """axe-core's WCAG 2.2 AA violations within the question's form (the rest of the page is
    tests/browser/test_browser_accessibility.py's)."""
    page.add_script_tag(url=f"{django_settings.STATIC_URL}vendor/axe-core/axe.min.js")
    script = "tags => axe.run('form.question', {runOnly: {type: 'tag', values: tags}})"
    results = page.evaluate(script, WCAG_AA)
    return [
        f"{violation['id']}: {' '.join(node['target'])}"
        for violation in results["violations"]
        for node in violation["nodes"]
    ]


def _asked(page_for, users, project, fake_provider, settings, tool="greet", era="2026"):
    settings.ROJO_MCP_IDLE_SECONDS = 2  # the server stops soon after the test
    project_root_create(project.pk)
    rojo = make_rojo(fake_provider.base_url)
    RojoMcpServer.objects.create(rojo=rojo, server=asking_server(era))
    fake_provider.add(
        stream(*tool_call_chunks([(f"asking__{tool}", {})])),
        stream(*text_chunks("Done.")),
    )
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    page.get_by_label("Message").fill("Greet me")
    page.keyboard.press("Enter")
    question = page.locator("form.question")
    # The first use starts the server: a Python process, slow on a busy machine.
    asks = {
        "greet": "What is your name?",
        "order": "Which toppings?",
        "visit": "Sign up",
        "confirm": "Fields named as a form's own?",
    }
    expect(question).to_contain_text(asks[tool], timeout=30_000)
    return page, question


def test_the_servers_form_is_answered_on_the_page_and_kept(
    page_for, users, project, fake_provider, settings
):
    page, question = _asked(page_for, users, project, fake_provider, settings)
    expect(question).to_contain_text("The MCP server Asking asks:")
    expect(question).to_contain_text("What is your name?")
    expect(question.locator(".question-time")).to_contain_text("left")
    expect(question.locator('[data-field="times"]')).to_have_value("1")  # the schema's default
    question.locator('[data-field="name"]').fill("Ada")
    question.locator('[data-field="times"]').fill("2")
    screenshot(page, "mcp-question")
    assert form_violations(page) == [], "the question's form passes WCAG 2.2 AA"
    question.get_by_role("button", name="Accept").click()

    expect(question.locator(".question-answer")).to_have_text("Accepted")
    expect(question.get_by_role("button")).to_have_count(0)
    expect(page.locator(".tool-line")).to_contain_text("ok")
    expect(page.locator(".bubble.assistant")).to_have_text("Done.")

    page.goto(f"/projects/{project.pk}/c/{Conversation.objects.get().pk}/")
    kept = page.locator("form.question")
    expect(kept).to_contain_text("What is your name?")
    expect(kept.locator(".question-answer")).to_have_text("Accepted")
    expect(kept.locator('[data-field="name"]')).to_have_value("Ada")
    expect(kept.locator('[data-field="name"]')).to_be_disabled()


def test_only_the_person_whose_turn_it_is_may_answer_and_a_decline_says_so(
    page_for, users, project, fake_provider, settings
):
    page, question = _asked(page_for, users, project, fake_provider, settings)
    owner = page_for(users["owner"])
    owner.goto(f"/projects/{project.pk}/c/{Conversation.objects.get().pk}/")
    waiting = owner.locator("form.question")
    expect(waiting.locator(".question-wait")).to_have_text("Waiting for editor to answer.")
    expect(waiting.get_by_role("button")).to_have_count(0)
    expect(waiting.locator('[data-field="name"]')).to_be_disabled()
    question.get_by_role("button", name="Decline").click()
    expect(waiting.locator(".question-answer")).to_have_text("Declined")
    expect(question.locator(".question-answer")).to_have_text("Declined")
    expect(page.locator(".bubble.assistant")).to_have_text("Done.")


def test_a_url_question_offers_a_link_it_does_not_open(
    page_for, users, project, fake_provider, settings
):
    page, question = _asked(page_for, users, project, fake_provider, settings, "visit", "2025")
    link = question.get_by_role("link", name="https://example.com/sign-up")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    assert len(page.context.pages) == 1, "a link the server gave was opened for the person"
    question.get_by_role("button", name="Cancel").click()
    expect(question.locator(".question-answer")).to_have_text("Cancelled")
    expect(page.locator(".bubble.assistant")).to_have_text("Done.")


def test_an_optional_field_of_several_choices_left_empty_sends_an_empty_list(
    page_for, users, project, fake_provider, settings
):
    """Every choice of an optional list field unticked is an answer: none. Before, the form
    left the field out, the schema's defaults filled it, and the server got the toppings
    the person had just taken off."""
    page, question = _asked(page_for, users, project, fake_provider, settings, "order")
    toppings = question.locator('select[data-field="toppings"]')
    expect(toppings).to_have_values(["cheese", "olives"])  # the schema's default
    toppings.select_option([])
    question.get_by_role("button", name="Accept").click()
    expect(question.locator(".question-answer")).to_have_text("Accepted")
    expect(page.locator(".bubble.assistant")).to_have_text("Done.")

    [result] = Message.objects.filter(role=Message.Role.TOOL)
    assert "toppings: none; crust: thin; note: Ring twice" in result.content


def test_an_optional_choice_and_text_emptied_reach_the_server_left_out(
    page_for, users, project, fake_provider, settings
):
    """An optional single choice and an optional text start at the schema's default; the
    person empties both, and the server gets them left out, not the defaults they removed.
    Reopened, the answered form shows them empty."""
    page, question = _asked(page_for, users, project, fake_provider, settings, "order")
    crust = question.locator('select[data-field="crust"]')
    note = question.locator('[data-field="note"]')
    expect(crust).to_have_value("thin")  # the schema's defaults
    expect(note).to_have_value("Ring twice")
    crust.select_option("")
    note.fill("")
    question.get_by_role("button", name="Accept").click()
    expect(question.locator(".question-answer")).to_have_text("Accepted")
    expect(page.locator(".bubble.assistant")).to_have_text("Done.")

    [result] = Message.objects.filter(role=Message.Role.TOOL)
    assert "crust: left out; note: left out" in result.content
    page.goto(f"/projects/{project.pk}/c/{Conversation.objects.get().pk}/")
    kept = page.locator("form.question")
    expect(kept.locator(".question-answer")).to_have_text("Accepted")
    expect(kept.locator('select[data-field="crust"]')).to_have_value("")
    expect(kept.locator('[data-field="note"]')).to_have_value("")


def test_a_field_of_several_choices_sends_a_list(
    page_for, users, project, fake_provider, settings, tmp_path
):
    """The reference server's form (`trigger-elicitation-request`) has fields whose value is
    a list of choices (`type: array` of `enum` or `anyOf` consts, SEP-1330): each is a list
    box of its choices with the schema's defaults chosen, and Accept sends a list."""
    from tests.mcp.test_mcp_everything import registered
    from tests.support.npx_packages import EVERYTHING, npx_installed

    command = npx_installed(EVERYTHING, "--version", says="Everything Server")
    settings.ROJO_MCP_IDLE_SECONDS = 2
    project_root_create(project.pk)
    rojo = make_rojo(fake_provider.base_url)
    with registered(command, "stdio", tmp_path) as server:
        RojoMcpServer.objects.create(rojo=rojo, server=server, ask_before=False)
        fake_provider.add(
            stream(*tool_call_chunks([("everything__trigger-elicitation-request", {})])),
            stream(*text_chunks("Done.")),
        )
        page = page_for(users["editor"])
        page.goto(f"/projects/{project.pk}/")
        page.get_by_label("Message").fill("Ask me")
        page.keyboard.press("Enter")
        question = page.locator("form.question")
        expect(question).to_contain_text("Please provide inputs", timeout=30_000)
        instruments = question.locator('select[data-field="untitledMultipleSelectEnum"]')
        expect(instruments).to_have_attribute("multiple", "")
        expect(instruments).to_have_values(["Guitar"])
        fish = question.locator('select[data-field="titledMultipleSelectEnum"]')
        expect(fish.locator("option")).to_have_text(["Tuna", "Salmon", "Trout"])
        question.locator('[data-field="name"]').fill("Ada")
        instruments.select_option(["Piano", "Bass"])
        question.get_by_role("button", name="Accept").click()
        expect(question.locator(".question-answer")).to_have_text("Accepted")
        expect(page.locator(".bubble.assistant")).to_have_text("Done.")

    [tool] = Message.objects.filter(role=Message.Role.TOOL)
    [asked] = tool.extra["questions"]
    content = asked["answer"]["content"]
    assert content["untitledMultipleSelectEnum"] == ["Piano", "Bass"]
    assert content["titledMultipleSelectEnum"] == ["fish-1"]
    assert content["name"] == "Ada"


def test_fields_named_as_a_forms_own_properties_break_neither_the_form_nor_its_replay(
    page_for, users, project, fake_provider, settings
):
    """A server's field called `querySelectorAll` (or `reportValidity`) took that name from
    the form: Accept threw with every button disabled, and the reopened conversation stopped
    showing at the question, the call's result and the reply after it gone."""
    page, question = _asked(page_for, users, project, fake_provider, settings, tool="confirm")
    question.locator('[data-field="querySelectorAll"]').fill("yes please")
    question.get_by_role("button", name="Accept").click()

    expect(question.locator(".question-answer")).to_have_text("Accepted")
    expect(page.locator(".bubble.assistant")).to_have_text("Done.")
    result = Message.objects.get(role=Message.Role.TOOL).content
    assert "got yes please (True)" in result

    page.goto(f"/projects/{project.pk}/c/{Conversation.objects.get().pk}/")
    kept = page.locator("form.question")
    expect(kept.locator(".question-answer")).to_have_text("Accepted")
    expect(kept.locator('[data-field="querySelectorAll"]')).to_have_value("yes please")
    expect(page.locator(".bubble.assistant")).to_have_text("Done.")
