"""update_plan: a plan of steps checked and acknowledged, touching no files; each malformed
plan is an error the model can correct."""

from pathlib import Path

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from roject.models import Role
from rojos.models import Rojo, default_tools
from rojos.tools import RojoToolContext, registry
from rojos.tools.update_plan import MAX_STEP_CHARS, MAX_STEPS
from tests.support.helpers import make_rojo


def ctx_for(root: Path, role: Role = Role.VIEWER) -> RojoToolContext:
    return RojoToolContext(project_id=1, project_root=root, role=role)


def steps(*statuses: str) -> list[dict]:
    return [{"step": f"Step {n}", "status": s} for n, s in enumerate(statuses, 1)]


async def test_a_plan_is_acknowledged_with_how_far_it_is(root):
    result = await registry.execute(
        "update_plan", {"plan": steps("done", "in_progress", "pending")}, ctx_for(root)
    )

    assert result == {"plan": "updated", "steps": 3, "done": 1}
    assert list(root.iterdir()) == []  # it touches no files


async def test_a_viewer_may_keep_a_plan(root):
    """It writes nothing, so a read-only role is offered it too."""
    tool = registry.get("update_plan")
    assert tool.writes is False
    assert tool in registry.available(ctx_for(root, Role.VIEWER))


async def test_more_than_one_step_in_progress_is_refused(root):
    result = await registry.execute(
        "update_plan", {"plan": steps("in_progress", "pending", "in_progress")}, ctx_for(root)
    )

    assert result == {
        "error": "steps 1, 3 are all in_progress; at most one step is in progress at a time"
    }


async def test_too_many_steps_are_refused(root):
    result = await registry.execute(
        "update_plan", {"plan": steps(*["pending"] * (MAX_STEPS + 1))}, ctx_for(root)
    )

    assert "at most 20 are allowed" in result["error"]


async def test_an_over_long_step_is_refused(root):
    plan = [{"step": "x" * (MAX_STEP_CHARS + 1), "status": "pending"}]

    result = await registry.execute("update_plan", {"plan": plan}, ctx_for(root))

    assert result["error"].startswith("step 1 is 201 characters long")


async def test_an_unknown_status_and_an_empty_step_are_refused(root):
    unknown = await registry.execute(
        "update_plan", {"plan": [{"step": "Write", "status": "started"}]}, ctx_for(root)
    )
    empty = await registry.execute(
        "update_plan", {"plan": [{"step": "  ", "status": "done"}]}, ctx_for(root)
    )

    assert "must be one of" in unknown["error"]
    assert empty == {"error": "step 1 has no text"}


async def test_a_plan_that_is_not_a_list_is_refused(root):
    result = await registry.execute("update_plan", {"plan": "1. write 2. test"}, ctx_for(root))

    assert result == {"error": "argument 'plan' must be of type array"}


def test_new_rojos_get_it():
    assert "update_plan" in default_tools()


@pytest.mark.django_db(transaction=True)
def test_the_upgrade_gives_it_to_rojos_left_on_the_default_tools_only(db):
    """A rojo on the earlier default tools gets update_plan; one whose tools an
    administrator chose keeps them; going back takes it away again."""
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes("rojos")
    name = next(n for app, n in executor.loader.disk_migrations if n.endswith("_rojo_update_plan"))
    before = executor.loader.get_migration("rojos", name).dependencies
    earlier_default = [n for n in default_tools() if n != "update_plan"]
    untouched = make_rojo("http://127.0.0.1:9/v1", slug="untouched")
    chosen = make_rojo("http://127.0.0.1:9/v1", slug="chosen")
    try:
        executor.migrate(before)
        Rojo.objects.filter(pk=untouched.pk).update(tools=earlier_default)
        Rojo.objects.filter(pk=chosen.pk).update(tools=["list_files", "search_text"])
        executor = MigrationExecutor(connection)
        executor.migrate(latest)
        untouched.refresh_from_db()
        chosen.refresh_from_db()
        assert untouched.tools == [*earlier_default, "update_plan"]
        assert chosen.tools == ["list_files", "search_text"]
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(latest)
