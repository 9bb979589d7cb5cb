"""The admin's page of the models rojos offer besides their defaults: prices prefilled from
the price table, a new window forgets what was learned of the old one, every save audited
on its rojo."""

from decimal import Decimal

import pytest
from django.urls import reverse

from rojos.models import ModelOption
from tests.support.helpers import audited, make_rojo

pytestmark = pytest.mark.django_db

OPENAI = "https://api.openai.com/v1"


def option_form(rojo, **fields) -> dict:
    data = {"rojo": str(rojo.pk), "name": "gpt-4.1-mini", "offered": "on", "context_window": ""}
    data.update(price_input="", price_cached_input="", price_output="")
    return {**data, **fields}


def test_an_option_of_a_known_model_gets_its_prices_and_is_audited_on_its_rojo(admin_client):
    rojo = make_rojo(OPENAI, model="gpt-4.1")

    response = admin_client.post(reverse("admin:rojos_modeloption_add"), option_form(rojo))

    assert response.status_code == 302
    option = ModelOption.objects.get(rojo=rojo)
    assert (option.price_input, option.price_output) == (Decimal("0.4"), Decimal("1.6"))
    entry = audited().get()
    assert (entry.action, entry.object_id) == ("rojo_changed", str(rojo.pk))
    assert entry.details["models"]["added"] == ["gpt-4.1-mini"]


def test_a_new_window_forgets_what_the_provider_listed_or_refused_for_the_model(admin_client):
    rojo = make_rojo(OPENAI, model="gpt-4.1")
    option = ModelOption.objects.create(
        rojo=rojo, name="gpt-4.1-mini", listed_window=9000, refused_window=8000
    )
    url = reverse("admin:rojos_modeloption_change", args=[option.pk])

    admin_client.post(url, option_form(rojo, context_window="16000", price_input="1"))

    option.refresh_from_db()
    assert (option.context_window, option.listed_window, option.refused_window) == (
        16000,
        None,
        None,
    )
    assert option.price_input == Decimal("1")
    changes = admin_client.get(reverse("admin:rojos_modeloption_changelist")).content.decode()
    assert "8,000" not in changes and "16,000 tokens" in changes
