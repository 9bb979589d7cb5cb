"""The built-in tools and the registry boundary where every failure becomes {"error": ...}."""

import json
import logging
import os

import pytest

from roject.models import Role
from rojos.tools import BUILTIN_TOOLS, RojoTool, RojoToolRegistry, echoed, registry
from tests.support.helpers import context, error_message

PLAIN_SCHEMA_KEYS = {"type", "properties", "required", "description", "enum", "items"}


class NoArguments(RojoTool):
    """A test-only tool without parameters that reports what it was called with."""

    name = "no_arguments"
    description = "Takes nothing."
    parameters = {"type": "object", "properties": {}}

    async def execute(self, args, ctx):
        return {"called_with": args}


class Exploding(RojoTool):
    """A test-only tool with a bug in it."""

    name = "exploding"
    description = "Always fails with an unexpected exception."
    parameters = {"type": "object", "properties": {}}

    async def execute(self, args, ctx):
        raise ZeroDivisionError("division by zero in /srv/secret/place")


class FailingOs(RojoTool):
    """A test-only tool whose OS call fails outside the storage gate."""

    name = "failing_os"
    description = "Always fails with an OSError."
    parameters = {"type": "object", "properties": {}}

    async def execute(self, args, ctx):
        raise PermissionError(13, "Permission denied", "/srv/secret/place")


class Counting(RojoTool):
    """A test-only tool with an integer and an enum parameter."""

    name = "counting"
    description = "Counts things."
    parameters = {
        "type": "object",
        "properties": {
            "count": {"type": "integer"},
            "unit": {"type": "string", "enum": ["lines", "bytes"]},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["count"],
    }

    async def execute(self, args, ctx):
        return args


# Each tool, happy path


async def test_read_path_meta_returns_type_size_and_time(root, ctx):
    """read_path_meta answers {"type", "size", "modifiedAt"} for a file."""
    (root / "notes.md").write_text("hello")
    os.utime(root / "notes.md", (1_700_000_000, 1_700_000_000))
    result = await registry.execute("read_path_meta", {"path": "notes.md"}, ctx)
    assert result == {"type": "file", "size": 5, "modifiedAt": "2023-11-14T22:13:20Z"}


async def test_read_path_meta_of_root_is_a_directory(ctx):
    """The empty path is the project root."""
    result = await registry.execute("read_path_meta", {"path": ""}, ctx)
    assert set(result) == {"type", "size", "modifiedAt"}
    assert result["type"] == "directory"


async def test_get_text_content_returns_the_string(root, ctx):
    """get_text_content answers the file's text itself, not a wrapper object."""
    (root / "notes.md").write_text("line one\nligne deux é\n")
    result = await registry.execute("get_text_content", '{"path": "notes.md"}', ctx)
    assert result == "line one\nligne deux é\n"


async def test_write_text_content_writes_and_creates_parents(root, ctx):
    """write_text_content answers {"ok": True} and leaves the file with that text."""
    args = {"path": "docs/new/plan.md", "text": "# Plan\n"}
    result = await registry.execute("write_text_content", args, ctx)
    assert result == {"ok": True}
    assert (root / "docs" / "new" / "plan.md").read_text() == "# Plan\n"


async def test_write_text_content_accepts_empty_text(root, ctx):
    """Writing "" empties the file."""
    (root / "notes.md").write_text("old")
    args = {"path": "notes.md", "text": ""}
    assert await registry.execute("write_text_content", args, ctx) == {"ok": True}
    assert (root / "notes.md").read_text() == ""


async def test_list_files_returns_sorted_names_and_types(root, ctx):
    """list_files answers [{"name", "type"}] sorted by name."""
    (root / "zeta.txt").write_text("z")
    (root / "alpha").mkdir()
    (root / "beta.md").write_text("b")
    result = await registry.execute("list_files", {"path": ""}, ctx)
    assert result == [
        {"name": "alpha", "type": "directory"},
        {"name": "beta.md", "type": "file"},
        {"name": "zeta.txt", "type": "file"},
    ]


async def test_create_directory_returns_ok(root, ctx):
    """create_directory answers {"ok": True} and makes the parents too."""
    result = await registry.execute("create_directory", {"path": "a/b"}, ctx)
    assert result == {"ok": True}
    assert (root / "a" / "b").is_dir()


async def test_create_existing_directory_is_ok(root, ctx):
    """An existing directory is not an error."""
    (root / "a").mkdir()
    assert await registry.execute("create_directory", {"path": "a"}, ctx) == {"ok": True}


async def test_create_directory_over_file_is_an_error(root, ctx):
    """An existing file at the path comes back as an error, and the file stays."""
    (root / "a").write_text("file")
    result = await registry.execute("create_directory", {"path": "a"}, ctx)
    assert error_message(result) == "'a' exists and is a file"
    assert (root / "a").read_text() == "file"


# Each tool, failures as values

TOOL_ARGS = {
    "read_path_meta": {},
    "get_text_content": {},
    "write_text_content": {"text": "x"},
    "list_files": {},
    "create_directory": {},
}


@pytest.mark.parametrize("name", list(TOOL_ARGS))
@pytest.mark.parametrize("bad_path", ["../escape", "/etc/passwd", "a\\b", "a\x00b"])
async def test_bad_path_is_an_error_value(root, ctx, name, bad_path):
    """A path the gate refuses comes back as {"error"} from every tool, revealing no server path."""
    result = await registry.execute(name, {"path": bad_path, **TOOL_ARGS[name]}, ctx)
    message = error_message(result)
    assert str(root.parent) not in message
    assert not (root.parent / "escape").exists()


@pytest.mark.parametrize("name", ["read_path_meta", "get_text_content", "list_files"])
async def test_missing_path_is_an_error_value(root, ctx, name):
    """Reading tools answer a missing path with an error naming it."""
    result = await registry.execute(name, {"path": "missing/thing.md"}, ctx)
    message = error_message(result)
    assert "'missing/thing.md'" in message
    assert str(root) not in message


async def test_write_text_content_to_directory_is_an_error(root, ctx):
    """Writing over a directory is refused as a value."""
    (root / "docs").mkdir()
    result = await registry.execute("write_text_content", {"path": "docs", "text": "x"}, ctx)
    assert error_message(result) == "'docs' is a directory"


async def test_get_text_content_of_binary_is_an_error(root, ctx):
    """A binary file is refused, telling the model why."""
    (root / "blob.bin").write_bytes(b"\x00\x01")
    result = await registry.execute("get_text_content", {"path": "blob.bin"}, ctx)
    assert error_message(result) == "'blob.bin' is a binary file, not text"


async def test_symlink_loop_is_an_error_value(root, ctx):
    """A symlink loop is reported like any refused path, not as an unexpected failure."""
    (root / "loop").symlink_to("loop")
    result = await registry.execute("get_text_content", {"path": "loop"}, ctx)
    message = error_message(result)
    assert "unexpectedly" not in message
    assert str(root) not in message


# Arguments


async def test_unknown_tool_is_named_and_available_tools_listed(ctx):
    """An unknown name comes back as an error naming it and what can be called instead."""
    result = await registry.execute("delete_everything", {}, ctx)
    assert error_message(result) == (
        "unknown tool 'delete_everything'; available tools: read_path_meta, "
        "get_text_content, write_text_content, list_files, create_directory, "
        "edit_text_content, move_path, delete_path, search_text, update_plan"
    )


async def test_unknown_tool_offers_only_what_the_viewer_may_call(root):
    """The list of alternatives leaves out tools the role may not use."""
    result = await registry.execute("nope", {}, context(root, role=Role.VIEWER))
    assert error_message(result) == (
        "unknown tool 'nope'; available tools: read_path_meta, get_text_content, list_files, "
        "search_text, update_plan"
    )


async def test_a_long_unknown_name_is_named_cut_short_never_between_surrogate_halves(ctx):
    """An error echoes a name by its first 100 characters and an ellipsis; a surrogate
    pair the cut would split (as text carried with surrogatepass has them) is left out
    whole, so the message stays encodable."""
    pair = "\ud83d\ude00"
    result = await registry.execute("a" * 99 + pair + "b" * 5000, {}, ctx)
    assert error_message(result).startswith(f"unknown tool {'a' * 99 + '…'!r}; available")
    assert echoed("c" * 100) == "c" * 100 and echoed("c" * 101) == "c" * 100 + "…"
    assert echoed("c" * 100 + pair) == "c" * 100 + "…"


async def test_arguments_as_json_object_string(root, ctx):
    """Arguments usually arrive as the JSON string the model streamed."""
    (root / "notes.md").write_text("hi")
    assert await registry.execute("get_text_content", '{"path": "notes.md"}', ctx) == "hi"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        pytest.param('{"path": "notes.md"', "arguments are not valid JSON", id="truncated"),
        pytest.param("{'path': 'notes.md'}", "arguments are not valid JSON", id="single-quotes"),
        pytest.param('["notes.md"]', "arguments must be a JSON object", id="array"),
        pytest.param('"notes.md"', "arguments must be a JSON object", id="string"),
        pytest.param("null", "arguments must be a JSON object", id="null"),
        pytest.param(["notes.md"], "arguments must be a JSON object", id="python-list"),
        pytest.param(7, "arguments must be a JSON object", id="python-int"),
        pytest.param("{}", "missing required argument 'path'", id="missing-required"),
        pytest.param("", "missing required argument 'path'", id="empty-is-no-arguments"),
        pytest.param(
            {"path": "notes.md", "mode": "r"},
            "unexpected argument 'mode' (allowed: 'path', 'offset', 'limit')",
            id="extra-argument",
        ),
        pytest.param({"path": 3}, "argument 'path' must be of type string", id="int-path"),
        pytest.param({"path": None}, "argument 'path' must be of type string", id="null-path"),
        pytest.param({"path": ["a"]}, "argument 'path' must be of type string", id="list-path"),
    ],
)
async def test_bad_arguments_are_error_values(root, ctx, arguments, expected):
    """Malformed or mismatched arguments tell the model what to fix, and nothing runs."""
    (root / "notes.md").write_text("hi")
    result = await registry.execute("get_text_content", arguments, ctx)
    assert expected in error_message(result)


async def test_invalid_json_error_says_where_and_what_to_send(ctx):
    """The JSON error points at the position and asks for an object."""
    result = await registry.execute("list_files", '{"path": ', ctx)
    message = error_message(result)
    assert "at position 9" in message
    assert "send a JSON object matching the tool's parameters" in message


async def test_write_with_missing_text_writes_nothing(root, ctx):
    """A write without its text argument is refused before the file is created."""
    result = await registry.execute("write_text_content", {"path": "notes.md"}, ctx)
    assert error_message(result) == "missing required argument 'text'"
    assert not (root / "notes.md").exists()


@pytest.mark.parametrize("arguments", ["", "   ", None, {}, "{}"])
async def test_no_arguments_mean_an_empty_object(ctx, arguments):
    """A tool without parameters runs with {} when the model sends "", blanks, null or {}."""
    tools = RojoToolRegistry([NoArguments()])
    assert await tools.execute("no_arguments", arguments, ctx) == {"called_with": {}}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        pytest.param({"count": True}, "argument 'count' must be of type integer", id="bool"),
        pytest.param({"count": 1.5}, "argument 'count' must be of type integer", id="float"),
        pytest.param({"count": "1"}, "argument 'count' must be of type integer", id="string"),
        pytest.param(
            {"count": 1, "unit": "pages"},
            "argument 'unit' must be one of ['lines', 'bytes']",
            id="not-in-enum",
        ),
        pytest.param(
            {"count": 1, "tags": ["a", 2]},
            "argument 'tags'[1] must be of type string",
            id="bad-array-item",
        ),
    ],
)
async def test_schema_types_are_checked_strictly(ctx, arguments, expected):
    """Booleans are not integers, enums are closed and array items are checked."""
    tools = RojoToolRegistry([Counting()])
    assert error_message(await tools.execute("counting", arguments, ctx)) == expected


async def test_valid_arguments_reach_the_tool_unchanged(ctx):
    """Arguments that match the schema are passed through as given."""
    tools = RojoToolRegistry([Counting()])
    arguments = {"count": 2, "unit": "lines", "tags": ["x"]}
    assert await tools.execute("counting", json.dumps(arguments), ctx) == arguments


# Roles and enabled tools


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("write_text_content", {"path": "notes.md", "text": "x"}),
        ("create_directory", {"path": "notes.md"}),
    ],
)
async def test_viewer_cannot_use_writing_tools(root, name, args):
    """A viewer's write is refused as a value and the project is unchanged."""
    result = await registry.execute(name, args, context(root, role=Role.VIEWER))
    assert error_message(result) == (
        f"tool {name!r} changes files, and your role in this project is read-only"
    )
    assert list(root.iterdir()) == []


@pytest.mark.parametrize("role", [Role.EDITOR, Role.OWNER])
async def test_editor_and_owner_can_write(root, role):
    """Editors and owners may use the writing tools."""
    args = {"path": "notes.md", "text": "x"}
    assert await registry.execute("write_text_content", args, context(root, role=role)) == {
        "ok": True
    }
    assert (root / "notes.md").read_text() == "x"


async def test_viewer_can_use_reading_tools(root):
    """Reading tools work for a viewer."""
    (root / "notes.md").write_text("hi")
    viewer = context(root, role=Role.VIEWER)
    assert await registry.execute("get_text_content", {"path": "notes.md"}, viewer) == "hi"
    assert await registry.execute("list_files", {"path": ""}, viewer) == [
        {"name": "notes.md", "type": "file"}
    ]


async def test_tool_not_enabled_is_refused_and_nothing_written(root):
    """A tool outside ctx.enabled is refused even for an owner."""
    owner = context(root, role=Role.OWNER, enabled={"get_text_content", "list_files"})
    args = {"path": "notes.md", "text": "x"}
    result = await registry.execute("write_text_content", args, owner)
    assert error_message(result) == "tool 'write_text_content' is not enabled for this rojo"
    assert list(root.iterdir()) == []


async def test_reading_tool_not_enabled_is_refused(root):
    """Enabling is not only about writes: a disabled reader is refused too."""
    (root / "notes.md").write_text("hi")
    ctx = context(root, enabled={"list_files"})
    result = await registry.execute("get_text_content", {"path": "notes.md"}, ctx)
    assert error_message(result) == "tool 'get_text_content' is not enabled for this rojo"


def test_available_tools_follow_role_and_enabled(root):
    """available() is what the role may use, intersected with what the rojo enabled."""
    viewer = context(root, role=Role.VIEWER)
    editor = context(root, enabled={"write_text_content", "list_files"})
    assert [t.name for t in registry.available(viewer)] == [
        "read_path_meta",
        "get_text_content",
        "list_files",
        "search_text",
        "update_plan",
    ]
    assert [t.name for t in registry.available(editor)] == ["write_text_content", "list_files"]


# Registration and definitions


def test_builtin_registry_holds_the_builtin_tools():
    """The exported registry has exactly the built-in tools, in declaration order."""
    assert registry.names() == [
        "read_path_meta",
        "get_text_content",
        "write_text_content",
        "list_files",
        "create_directory",
        "edit_text_content",
        "move_path",
        "delete_path",
        "search_text",
        "read_result",
        "update_plan",
    ]
    assert [type(tool) for tool in registry] == list(BUILTIN_TOOLS)


def test_only_writing_tools_are_marked_as_writes():
    """The writes flag is what keeps viewers out, so it must be right on each tool."""
    assert {tool.name for tool in registry if tool.writes} == {
        "write_text_content",
        "create_directory",
        "edit_text_content",
        "move_path",
        "delete_path",
    }


def test_duplicate_tool_name_is_refused_at_registration():
    """Two tools with one name fail when the registry is built."""
    with pytest.raises(ValueError, match="already registered"):
        RojoToolRegistry([NoArguments(), NoArguments()])


@pytest.mark.parametrize(
    "name",
    ["", "has space", "dotted.name", "slash/name", "é", "x" * 65, None, 7],
)
def test_malformed_tool_name_is_refused_at_registration(name):
    """Names the providers would reject fail when registered, not at the first chat."""
    tool_class = type("Misnamed", (NoArguments,), {"name": name})
    with pytest.raises(ValueError, match="must match"):
        RojoToolRegistry([tool_class()])


def test_longest_allowed_tool_name_registers():
    """Sixty-four characters of letters, digits, _ and - are accepted."""
    name = "a-Z_9" + "x" * 59
    tool_class = type("LongName", (NoArguments,), {"name": name})
    assert name in RojoToolRegistry([tool_class()])


def test_parameters_must_be_an_object_schema():
    """A tool whose parameters are not a JSON object schema is refused."""
    tool_class = type("ArrayParams", (NoArguments,), {"parameters": {"type": "array"}})
    with pytest.raises(ValueError, match="type object"):
        RojoToolRegistry([tool_class()])


def test_definitions_have_the_function_calling_shape():
    """Each definition is {"type": "function", "function": {name, description, parameters}}."""
    definitions = registry.definitions()
    assert [d["function"]["name"] for d in definitions] == registry.names()
    for definition in definitions:
        assert set(definition) == {"type", "function"}
        assert definition["type"] == "function"
        function = definition["function"]
        assert set(function) == {"name", "description", "parameters"}
        assert function["description"].strip()
        assert function["parameters"]["type"] == "object"
        assert set(function["parameters"]["required"]) <= set(function["parameters"]["properties"])
        json.dumps(definition)


def schema_keys(schema: dict) -> set[str]:
    """Every keyword used in a schema, recursing through properties and items."""
    keys = set(schema)
    for sub in schema.get("properties", {}).values():
        keys |= schema_keys(sub)
    if "items" in schema:
        keys |= schema_keys(schema["items"])
    return keys


@pytest.mark.parametrize("definition", registry.definitions(), ids=registry.names())
def test_parameters_use_only_the_plain_schema_subset(definition):
    """No additionalProperties, $schema or other keywords some providers reject."""
    assert schema_keys(definition["function"]["parameters"]) <= PLAIN_SCHEMA_KEYS


def test_definitions_for_named_tools_skip_unknown_names():
    """Asking for a subset returns those tools in the order asked, ignoring unknown names."""
    definitions = registry.definitions(["list_files", "nope", "read_path_meta"])
    assert [d["function"]["name"] for d in definitions] == ["list_files", "read_path_meta"]


# Unexpected failures


async def test_unexpected_exception_becomes_an_error_value(ctx, caplog):
    """A bug in a tool is logged with its traceback and answered with a generic error."""
    tools = RojoToolRegistry([Exploding()])
    with caplog.at_level(logging.ERROR, logger="rojos.tools.registry"):
        result = await tools.execute("exploding", {}, ctx)
    assert error_message(result) == "tool 'exploding' failed unexpectedly; see the server log"
    assert [r.exc_info[0] for r in caplog.records] == [ZeroDivisionError]


async def test_os_error_becomes_its_reason_without_the_path(ctx):
    """An OSError raised outside the gate gives its reason, not the file name it carries."""
    tools = RojoToolRegistry([FailingOs()])
    result = await tools.execute("failing_os", {}, ctx)
    assert error_message(result) == "Permission denied"
