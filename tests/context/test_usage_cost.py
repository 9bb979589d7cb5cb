"""Usage and cost: prices prefilled from the shipped price table, each turn's tokens and cost
and the conversation's total through the API, the admin's report per day with CSV."""

import csv
import io
from decimal import Decimal

import pytest
from django.urls import reverse

from rojos.models import Rojo, UsageRecord
from tests.support.fake_provider import Window, stream, text_chunks, tool_call_chunks, usage_chunk
from tests.support.helpers import make_rojo, run
from tests.support.live_server import ApiClient
from tests.web.test_admin import rojo_form

OPENAI = "https://api.openai.com/v1"


@pytest.mark.django_db
def test_a_known_models_prices_are_prefilled_offline_and_an_unknown_one_has_none():
    run("create_rojo", name="Mini", base_url=OPENAI, model="gpt-4.1-mini")
    run("create_rojo", name="Local", base_url="http://127.0.0.1:11434/v1", model="llama3.1")

    mini, local = Rojo.objects.get(slug="mini"), Rojo.objects.get(slug="local")
    assert (mini.price_input, mini.price_cached_input, mini.price_output) == (
        Decimal("0.4"),
        Decimal("0.1"),
        Decimal("1.6"),
    )
    assert (local.price_input, local.price_output) == (None, None)


@pytest.mark.django_db
def test_the_admin_prefills_prices_it_knows_and_keeps_the_ones_typed_in(admin_client):
    admin_client.post(
        reverse("admin:rojos_rojo_add"),
        rojo_form(slug="known", base_url=OPENAI, model="gpt-4.1-mini"),
    )
    admin_client.post(
        reverse("admin:rojos_rojo_add"),
        rojo_form(
            slug="typed", name="Typed", model="gpt-4.1-mini", price_input="9", price_output="9"
        ),
    )

    known, typed = Rojo.objects.get(slug="known"), Rojo.objects.get(slug="typed")
    assert (known.price_input, known.price_output) == (Decimal("0.4"), Decimal("1.6"))
    assert (typed.price_input, typed.price_output) == (Decimal("9"), Decimal("9"))


@pytest.fixture
def editor_client(asgi_server, users):
    client = ApiClient(asgi_server, users["editor"])
    yield client
    client.close()


@pytest.mark.django_db(transaction=True)
def test_each_turn_shows_its_tokens_and_cost_and_the_conversation_its_total(
    editor_client, fake_provider, project
):
    """Cached input at its own price; the turn counts its two model calls; the total adds
    the turns; the meter says how much of the window the next request would take."""
    fake_provider.window = Window(tokens=12_000)
    fake_provider.add(
        stream(
            tool_call_chunks([("list_files", {"path": ""})]), usage_chunk(1_000, 50, cached=600)
        ),
        stream(text_chunks("Empty."), usage_chunk(1_100, 150, cached=1_000)),
        stream(text_chunks("Still empty."), usage_chunk(1_200, 40)),
    )
    rojo = make_rojo(
        fake_provider.base_url,
        context_window=12_000,
        price_input=Decimal("2"),
        price_cached_input=Decimal("0.5"),
        price_output=Decimal("8"),
    )

    first = editor_client.chat(project.pk, rojo=rojo.slug, message="List the files")
    conversation = first[0].data["conversation"]
    second = editor_client.chat(
        project.pk, rojo=rojo.slug, message="And now?", conversation=conversation
    )
    usage = editor_client.get(f"/api/conversations/{conversation}/usage").json()
    detail = editor_client.get(f"/api/conversations/{conversation}").json()

    one, two = (str(events[0].data["message"]) for events in (first, second))
    cost_one = (400 * 2 + 600 * 0.5 + 50 * 8 + 100 * 2 + 1_000 * 0.5 + 150 * 8) / 1e6
    cost_two = (1_200 * 2 + 40 * 8) / 1e6
    assert usage["turns"][one] == {
        "prompt": 2_100,
        "completion": 200,
        "cached": 1_600,
        "reasoning": 0,
        "cost": f"{Decimal(str(cost_one)):.8f}",
        "estimated": False,
        "calls": 2,
    }
    assert usage["turns"][two]["cost"] == f"{Decimal(str(cost_two)):.8f}"
    assert usage["total"]["prompt"] == 3_300 and usage["total"]["calls"] == 3
    assert Decimal(usage["total"]["cost"]) == Decimal(str(cost_one + cost_two)).quantize(
        Decimal("0.00000001")
    )
    assert usage["context"]["window"] == 12_000 and 0 < usage["context"]["used"] < 12_000
    assert detail["usage"] == usage


@pytest.mark.django_db
def test_the_admin_reports_usage_per_day_user_project_and_rojo_with_a_csv(
    admin_client, project, users
):
    rojo = make_rojo("http://127.0.0.1:9/v1")
    other = make_rojo("http://127.0.0.1:9/v1", slug="other", name="Other rojo")
    for who, which, tokens, cost in [
        (users["editor"], rojo, 100, "0.01"),
        (users["editor"], rojo, 200, "0.02"),
        (users["owner"], other, 50, None),
    ]:
        UsageRecord.objects.create(
            user=who,
            project=project,
            rojo=which,
            prompt_tokens=tokens,
            completion_tokens=10,
            cost=cost and Decimal(cost),
        )

    page = admin_client.get(reverse("admin:rojos_usage_report"))
    exported = admin_client.get(reverse("admin:rojos_usage_report"), {"format": "csv"})

    assert page.status_code == 200
    assert "Export CSV" in page.content.decode()
    rows = list(csv.DictReader(io.StringIO(exported.content.decode())))
    assert [(r["user"], r["rojo"], r["calls"], r["prompt_tokens"], r["cost"]) for r in rows] == [
        ("editor", "Test rojo", "2", "300", "0.03000000"),
        ("owner", "Other rojo", "1", "50", ""),
    ]
    assert {r["project"] for r in rows} == {project.name}
    project.name = '=HYPERLINK("http://evil.test")'
    project.save(update_fields=["name"])
    again = admin_client.get(reverse("admin:rojos_usage_report"), {"format": "csv"})
    named = {r["project"] for r in csv.DictReader(io.StringIO(again.content.decode()))}
    assert named == {"'" + project.name}  # text in a spreadsheet, not a formula
    assert exported["Content-Disposition"].startswith('attachment; filename="usage-')
    changelist = admin_client.get(reverse("admin:rojos_usagerecord_changelist"))
    assert changelist.status_code == 200 and "Report per day" in changelist.content.decode()


@pytest.mark.django_db
def test_the_admins_usage_pages_read_the_records_of_their_days_through_an_index(
    admin_client, project, users
):
    """The report reads its days' records through the index on `created`
    (rojos/migrations/0033), and the list its page of the newest: not every record ever
    made, scanned for the report (360 ms with 100,000, 60 ms now) and sorted for the list
    (45 ms, 6 ms now)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's plans: PostgreSQL plans a small table by its statistics")
    rojo = make_rojo("http://127.0.0.1:9/v1")
    UsageRecord.objects.create(user=users["editor"], project=project, rojo=rojo, prompt_tokens=9)

    def plans(url: str) -> list[list[str]]:
        with CaptureQueriesContext(connection) as queries:
            assert admin_client.get(url).status_code == 200
        found = []
        for query in queries:
            if 'FROM "rojos_usagerecord"' in query["sql"] and "MIN(" not in query["sql"]:
                with connection.cursor() as cursor:
                    cursor.execute(f"EXPLAIN QUERY PLAN {query['sql']}")
                    found.append([row[-1] for row in cursor.fetchall()])
        return found

    (report,) = plans(reverse("admin:rojos_usage_report"))
    assert [step for step in report if "rojos_usagerecord" in step] == [
        "SEARCH rojos_usagerecord USING INDEX usagerecord_created (created>? AND created<?)"
    ], report
    listed = [
        plan
        for plan in plans(reverse("admin:rojos_usagerecord_changelist"))
        if any("LEFT-JOIN" in step for step in plan)  # the page's rows, with their names
    ]
    assert listed and all("USE TEMP B-TREE FOR ORDER BY" not in plan for plan in listed), listed
