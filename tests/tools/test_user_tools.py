"""Tools of other apps: the decorator, the ROJO_TOOL_MODULES setting and the guide's example."""

import re
import sys
import types
from pathlib import Path
from typing import Literal

import pytest
from django.apps import apps

from roject.models import Role
from roject.storage import project_root_create
from rojos.admin import RojoForm
from rojos.tools import RojoToolContext, RojoToolRegistry, registry, rojo_tool
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import assert_history_valid, make_rojo, stored_history
from tests.support.live_server import ApiClient

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide.md"


def readme_example() -> str:
    text = GUIDE.read_text()
    match = re.search(r"<!-- example: user tool -->\s*```python\n(.*?)```", text, re.S)
    assert match, "the guide's user-tool example is missing"
    return match.group(1)


@pytest.fixture
def cleanup_tools():
    names: list[str] = []
    yield names
    for name in names:
        registry.unregister(name)
    sys.modules.pop("tests.support.example_tools", None)


def ctx_for(root: Path, role=Role.EDITOR, enabled=None) -> RojoToolContext:
    return RojoToolContext(project_id=1, project_root=root, role=role, enabled=enabled)


async def test_readme_example_registers_a_working_tool(tmp_path, cleanup_tools):
    """The guide's worked example runs as written and its tool works through the registry."""
    module = types.ModuleType("myapp_rojo_tools")
    exec(compile(readme_example(), "docs/guide.md", "exec"), module.__dict__)
    cleanup_tools.append("word_count")

    tool = registry.get("word_count")
    assert tool.definition == {
        "type": "function",
        "function": {
            "name": "word_count",
            "description": "Count the words in a text file of the project. Read-only.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "The file, relative to the project root.",
                    },
                    "unique": {
                        "type": "boolean",
                        "description": "Count each distinct word once.",
                    },
                },
                "required": ["path"],
            },
        },
    }
    assert tool.writes is False
    (tmp_path / "notes.txt").write_text("to be or not to be")
    ctx = ctx_for(tmp_path)
    assert await registry.execute("word_count", '{"path": "notes.txt"}', ctx) == {"words": 6}
    assert await registry.execute("word_count", {"path": "notes.txt", "unique": True}, ctx) == {
        "words": 4
    }
    outside = await registry.execute("word_count", {"path": "../secret"}, ctx)
    assert outside == {"error": "path '../secret' is outside the project root"}
    extra = await registry.execute("word_count", {"path": "notes.txt", "x": 1}, ctx)
    assert extra["error"].startswith("unexpected argument 'x'")


def test_tool_modules_setting_loads_an_apps_tools(settings, cleanup_tools):
    """Modules named in ROJO_TOOL_MODULES are imported at startup and their tools registered."""
    settings.ROJO_TOOL_MODULES = ["tests.support.example_tools"]
    cleanup_tools.extend(["stamp_file", "shout"])
    apps.get_app_config("rojos").ready()

    assert registry.get("stamp_file").writes is True
    assert registry.get("shout").definition["function"]["description"] == (
        "Return the text in capitals."
    )
    choices = dict(RojoForm().fields["tools"].choices)
    assert (
        choices["stamp_file"]
        == "stamp_file (writes) — Append stamp lines to a file, creating it if needed"
    )
    assert choices["shout"].startswith("shout — Return the text in capitals")


@pytest.mark.django_db(transaction=True)
def test_an_enabled_user_tool_runs_in_a_chat(
    settings, cleanup_tools, asgi_server, users, project, fake_provider
):
    """A rojo with the app's tool enabled calls it like a built-in; a viewer cannot."""
    settings.ROJO_TOOL_MODULES = ["tests.support.example_tools"]
    cleanup_tools.extend(["stamp_file", "shout"])
    apps.get_app_config("rojos").ready()
    rojo = make_rojo(fake_provider.base_url, tools=["stamp_file", "list_files"])
    fake_provider.add(
        stream(*tool_call_chunks([("stamp_file", {"path": "log.txt", "times": 2})])),
        stream(*text_chunks("Stamped twice.")),
    )
    client = ApiClient(asgi_server, users["editor"])
    try:
        events = client.chat(project.pk, rojo=rojo.slug, message="Stamp the log twice")
    finally:
        client.close()

    offered = {t["function"]["name"] for t in fake_provider.requests[0]["tools"]}
    assert offered == {"stamp_file", "list_files"}
    result = next(e for e in events if e.type == "TOOL_RESULT")
    assert result.data == {
        "id": result.data["id"],
        "name": "stamp_file",
        "result": {"ok": True},
        "ok": True,
    }
    assert (project_root_create(project.pk) / "log.txt").read_text() == "stamp\nstamp\n"
    assert_history_valid(stored_history(events[0].data["conversation"]))

    viewer_ctx = ctx_for(project_root_create(project.pk), Role.VIEWER, frozenset(rojo.tools))
    assert [t.name for t in registry.available(viewer_ctx)] == ["list_files"]


def test_decorator_derives_types_defaults_and_enums():
    """Hints map to the plain schema subset; defaults make arguments optional."""
    local = RojoToolRegistry()

    @rojo_tool(registry=local, name="pick")
    async def choose(
        ctx: RojoToolContext,
        mode: Literal["fast", "slow"],
        count: int,
        ratio: float = 0.5,
        tags: list[str] | None = None,
        options: dict | None = None,
    ) -> str:
        """Pick something."""
        return mode

    parameters = local.get("pick").parameters
    assert parameters == {
        "type": "object",
        "properties": {
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "options": {"type": "object"},
        },
        "required": ["mode", "count"],
    }
    assert local.get("pick").default_enabled is False


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def f(ctx, path: str):\n    '''Doc.'''", "must be an async function"),
        ("async def f(ctx, path):\n    '''Doc.'''", "every argument needs a type hint"),
        ("async def f(ctx, path: str):\n    pass", "the docstring is the model's description"),
        ("async def f(ctx, when: bytes):\n    '''Doc.'''", "unsupported type"),
    ],
    ids=["sync", "no-hint", "no-docstring", "bad-type"],
)
def test_decorator_refuses_what_it_cannot_describe(source, message):
    """Mistakes fail when the tool is registered, not at the first chat."""
    namespace: dict = {}
    exec(source, namespace)
    with pytest.raises(TypeError, match=message):
        rojo_tool(registry=RojoToolRegistry())(namespace["f"])
