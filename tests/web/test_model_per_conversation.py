"""A model per conversation: a rojo offers several models, each conversation asks its own,
a regenerate with another model is a branch beside the first answer, and the window meter,
the prices and what is learned follow the model."""

from decimal import Decimal

import pytest
from django.contrib.auth.models import Permission

from rojos.context.discovery import window_discovery_forget
from rojos.models import Conversation, Message, ModelOption, Rojo, UsageRecord
from tests.support.fake_provider import MODEL, Window, http_error, stream, text_chunks
from tests.support.helpers import make_rojo

pytestmark = pytest.mark.django_db(transaction=True)

SMALL = "small-model"


@pytest.fixture
def rojo(fake_provider, settings):
    """A rojo whose default model lists a 50,000-token window and which offers SMALL, listed
    with 8,192 tokens and priced."""
    settings.ROJO_PROVIDER_RETRIES = 0
    window_discovery_forget()  # another test may have asked this provider about these models
    fake_provider.window = Window(tokens=50_000, listed_by="vllm")
    fake_provider.models = [{"id": SMALL, "max_model_len": 8192}]
    rojo = make_rojo(fake_provider.base_url)
    ModelOption.objects.create(
        rojo=rojo, name=SMALL, price_input=Decimal(1), price_output=Decimal(2)
    )
    return rojo


def reply(text: str):
    return stream(*text_chunks(text, pieces=2))


def chat(client, project, rojo, message: str, **extra) -> int:
    events = client.chat(project.pk, rojo=rojo.pk, message=message, **extra)
    assert events[-1].type == "DONE", events
    return events[0].data["conversation"]


def meter(client, conversation_id: int) -> tuple[int, str]:
    """What the window meter shows: the window of the conversation's model, and the model."""
    response = client.get(f"/api/conversations/{conversation_id}/usage")
    assert response.status_code == 200
    context = response.json()["context"]
    assert 0 < context["used"] < context["window"]
    return context["window"], context["model"]


def replies(conversation_id: int) -> list[tuple[int, str, str]]:
    """(branch, text, model) of each assistant message of the conversation."""
    rows = Message.objects.filter(conversation_id=conversation_id, role="assistant")
    return sorted(rows.values_list("branch", "content", "model"))


def test_two_models_on_one_rojo_a_conversation_each_and_a_regenerate_with_the_other_as_a_branch(
    client_for, users, project, rojo, fake_provider
):
    """A conversation on the default and one on SMALL each ask their own model; regenerating
    the first one's reply with SMALL asks SMALL on a new branch, both answers kept; the window
    meter shows each conversation's model's window, and follows a change of model."""
    client = client_for(users["editor"])
    fake_provider.add(reply("Default says hi."), reply("Small says hi."), reply("Small again."))

    first = chat(client, project, rojo, "Hello")
    second = chat(client, project, rojo, "Hello", model=SMALL)

    assert fake_provider.models_asked == [MODEL, SMALL]
    assert Conversation.objects.get(pk=first).model == ""
    assert Conversation.objects.get(pk=second).model == SMALL
    assert meter(client, first) == (50_000, MODEL)
    assert meter(client, second) == (8192, SMALL)

    asked = Message.objects.get(conversation_id=first, role="user")
    chat(client, project, rojo, "Hello", conversation=first, replace=asked.pk, model=SMALL)

    assert fake_provider.models_asked[-1] == SMALL
    assert replies(first) == [(0, "Default says hi.", MODEL), (1, "Small again.", SMALL)]
    detail = client.get(f"/api/conversations/{first}").json()
    assert detail["model"] == "" and detail["branch"] == 1
    [choices] = detail["choices"].values()
    assert len(choices) == 2
    assert [m["model"] for m in detail["messages"] if m["role"] == "assistant"] == [SMALL]
    assert meter(client, first) == (50_000, MODEL)  # the conversation kept its model
    exported = client.get(f"/api/conversations/{first}/export?format=json").json()
    answered = {(m["branch"], m["model"]) for m in exported["messages"] if m["role"] == "assistant"}
    assert answered == {(0, MODEL), (1, SMALL)}

    changed = client.post(f"/api/conversations/{first}/model", json={"model": SMALL})

    assert changed.status_code == 200 and changed.json() == {"model": SMALL}
    assert meter(client, first) == (8192, SMALL)
    costs = dict(UsageRecord.objects.values_list("model", "cost").order_by("model", "cost"))
    assert costs[MODEL] is None and costs[SMALL] > 0  # SMALL's prices, not the rojo's
    learned = ModelOption.objects.get(rojo=rojo, name=SMALL)
    assert learned.listed_window == 8192 and learned.chars_per_token is not None
    assert Rojo.objects.get(pk=rojo.pk).listed_window == 50_000


def test_a_model_the_rojo_does_not_offer_is_refused_before_anything_is_stored(
    client_for, users, project, rojo, fake_provider
):
    client = client_for(users["editor"])

    with client.chat_stream(project.pk, rojo=rojo.pk, message="Hi", model="gpt-nope") as response:
        response.read()

    assert response.status_code == 400
    assert "does not offer the model 'gpt-nope'" in response.json()["detail"]
    assert not Conversation.objects.exists()
    assert fake_provider.requests == []


def test_the_rojo_bar_picks_a_conversations_model_with_the_access_of_the_chat(
    client_for, users, project, rojo, fake_provider
):
    """The editor's conversation: the editor may change its model, to one the rojo offers;
    a viewer may not (403), an outsider does not see it (404), nor a page of another site
    (no CSRF token: 403)."""
    fake_provider.add(reply("Hi."))
    conversation = chat(client_for(users["editor"]), project, rojo, "Hello")
    path = f"/api/conversations/{conversation}/model"

    refused = client_for(users["editor"]).post(path, json={"model": "gpt-nope"})
    viewer = client_for(users["viewer"]).post(path, json={"model": SMALL})
    outsider = client_for(users["outsider"]).post(path, json={"model": SMALL})
    anonymous = client_for().post(path, json={"model": SMALL})
    forged = client_for(users["editor"]).post(
        path, json={"model": SMALL}, headers={"X-CSRFToken": "not-the-cookies-token"}
    )

    assert refused.status_code == 400
    assert (viewer.status_code, outsider.status_code, anonymous.status_code) == (403, 404, 401)
    assert forged.status_code == 403
    assert Conversation.objects.get(pk=conversation).model == ""
    picked = client_for(users["editor"]).post(path, json={"model": SMALL})
    assert picked.status_code == 200
    assert Conversation.objects.get(pk=conversation).model == SMALL
    default = client_for(users["editor"]).post(path, json={"model": MODEL})
    assert default.json() == {"model": MODEL}
    assert Conversation.objects.get(pk=conversation).model == ""  # the default: follows the rojo


def test_a_rojo_offering_any_listed_model_lists_the_providers_models_on_refresh(
    client_for, users, project, rojo, fake_provider
):
    """The list is the stored one until Refresh asks the provider (with the rojo's key);
    a model from it may then be picked, and what is learned of it is kept in an option row
    that offers nothing by itself."""
    fake_provider.models.append({"id": "listed-model", "max_model_len": 16_384})
    Rojo.objects.filter(pk=rojo.pk).update(any_listed_model=True)
    client = client_for(users["editor"])

    before = client.get(f"/api/rojos/{rojo.slug}/models").json()
    refreshed = client.post(f"/api/rojos/{rojo.pk}/models/refresh")

    assert before["models"] == [MODEL, SMALL] and before["fetched"] is None
    assert refreshed.status_code == 200
    assert refreshed.json()["models"] == [MODEL, SMALL, "listed-model"]
    assert fake_provider.listing_requests == ["/v1/models"]
    assert fake_provider.listing_headers[0]["authorization"] == f"Bearer {rojo.api_key}"
    fake_provider.add(reply("Listed says hi."))
    conversation = chat(client, project, rojo, "Hello", model="listed-model")
    assert fake_provider.models_asked == ["listed-model"]
    assert meter(client, conversation) == (16_384, "listed-model")
    kept = ModelOption.objects.get(rojo=rojo, name="listed-model")
    assert kept.offered is False and kept.listed_window == 16_384


def test_a_provider_that_refuses_its_model_list_gets_a_clear_error_and_the_list_stays(
    client_for, users, project, rojo, fake_provider
):
    Rojo.objects.filter(pk=rojo.pk).update(any_listed_model=True, provider_models=["kept-model"])
    fake_provider.models_refused = http_error(401, "Incorrect API key provided")
    client = client_for(users["editor"])

    refused = client.post(f"/api/rojos/{rojo.pk}/models/refresh")

    assert refused.status_code == 502
    assert "answered 401" in refused.json()["detail"]
    assert "sk-test" not in refused.text
    assert Rojo.objects.get(pk=rojo.pk).provider_models == ["kept-model"]
    assert client.get(f"/api/rojos/{rojo.pk}/models").json()["models"][-1] == "kept-model"


def test_a_rojo_offering_only_its_listed_models_does_not_ask_the_provider_on_refresh(
    client_for, users, project, rojo, fake_provider
):
    """Refresh answers the listed models without a request; a visitor who is not logged in
    gets neither the list nor a refresh."""
    response = client_for(users["editor"]).post(f"/api/rojos/{rojo.pk}/models/refresh")
    anonymous = client_for()

    assert response.status_code == 200 and response.json()["models"] == [MODEL, SMALL]
    assert fake_provider.listing_requests == []
    assert anonymous.get(f"/api/rojos/{rojo.pk}/models").status_code == 401
    assert anonymous.post(f"/api/rojos/{rojo.pk}/models/refresh").status_code == 401


def test_only_someone_who_may_use_the_rojo_makes_the_server_ask_its_provider_for_models(
    client_for, users, project, rojo, fake_provider
):
    """Refresh sends the rojo's key to its provider: a user who is a member of no project
    (who can chat with no rojo) is refused, with no request made; any member, a viewer
    too, and an administrator who may change rojos may ask."""
    Rojo.objects.filter(pk=rojo.pk).update(any_listed_model=True)
    path = f"/api/rojos/{rojo.pk}/models/refresh"
    staff = users["outsider"]

    outsider = client_for(users["outsider"]).post(path)
    staff.is_staff = True
    staff.save()
    staff_without_right = client_for(staff).post(path)

    assert (outsider.status_code, staff_without_right.status_code) == (403, 403)
    assert fake_provider.listing_requests == []
    assert Rojo.objects.get(pk=rojo.pk).provider_models_fetched is None
    assert client_for(users["viewer"]).post(path).status_code == 200
    staff.user_permissions.add(Permission.objects.get(codename="change_rojo"))
    assert client_for(staff).post(path).status_code == 200


def test_a_listed_model_without_a_price_is_refused_under_a_cost_budget(
    client_for, users, project, rojo, fake_provider, settings
):
    """Any listed model may be picked, and one the price table does not know costs nothing:
    under a cost budget it is refused before anything is stored (else every reply on it
    would pass the budget), while the rojo's default, unpriced too, is the administrator's
    to price and runs; without a cost budget the unpriced pick runs."""
    Rojo.objects.filter(pk=rojo.pk).update(
        any_listed_model=True, provider_models=["mystery-model-7b"]
    )
    settings.ROJO_USER_DAILY_COST = 5
    client = client_for(users["editor"])

    with client.chat_stream(
        project.pk, rojo=rojo.pk, message="Hi", model="mystery-model-7b"
    ) as response:
        response.read()

    assert response.status_code == 429
    assert "'mystery-model-7b' has no price" in response.json()["detail"]
    assert not Conversation.objects.exists()
    assert fake_provider.requests == []
    fake_provider.add(reply("Default says hi."), reply("Mystery says hi."))
    chat(client, project, rojo, "Hello")  # the default, no price set on the rojo
    settings.ROJO_USER_DAILY_COST = 0
    chat(client, project, rojo, "Hello", model="mystery-model-7b")
    assert fake_provider.models_asked == [MODEL, "mystery-model-7b"]
