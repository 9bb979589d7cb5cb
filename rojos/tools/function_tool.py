"""Tools from plain async functions: the schema comes from type hints, the text from the docstring.

@rojo_tool()
async def word_count(ctx: RojoToolContext, path: str) -> dict:
    '''Count the words of a text file.

    Args:
        path: The file, relative to the project root.
    '''
"""

import inspect
import re
import types
import typing
from collections.abc import Awaitable, Callable
from typing import Any, Literal, get_args, get_origin

from .base import RojoTool, RojoToolContext

_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}
_ARG_LINE = re.compile(r"^ {2,6}(\w+)\s*(?:\([^)]*\))?:\s*(.*)$")


def _schema(annotation: Any, where: str) -> dict:
    """The plain JSON-schema subset for a type hint (no $ref, no additionalProperties)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation in _SCALARS:
        return {"type": _SCALARS[annotation]}
    if origin is Literal:
        kinds = {type(a) for a in args}
        if len(kinds) != 1 or next(iter(kinds)) not in _SCALARS:
            raise TypeError(f"{where}: Literal values must share one scalar type")
        return {"type": _SCALARS[kinds.pop()], "enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _schema(options[0], where)
    if annotation is list or origin is list:
        return {"type": "array", **({"items": _schema(args[0], where)} if args else {})}
    if annotation is dict or origin is dict:
        return {"type": "object"}
    raise TypeError(
        f"{where}: unsupported type {annotation!r}; use str, int, float, bool, "
        "Literal, list or dict"
    )


def _docstring_parts(doc: str) -> tuple[str, dict[str, str]]:
    """The description (before an `Args:` section) and each argument's description."""
    doc = inspect.cleandoc(doc or "")
    head, _, args_section = doc.partition("\nArgs:")
    described = {}
    current = None
    for line in args_section.splitlines():
        match = _ARG_LINE.match(line)
        if match:
            current = match.group(1)
            described[current] = match.group(2).strip()
        elif current and line.strip():
            described[current] += " " + line.strip()
    return " ".join(head.split()), described


class FunctionTool(RojoTool):
    """A RojoTool around an async function `fn(ctx, **arguments)`."""

    def __init__(self, fn: Callable[..., Awaitable[Any]], *, name: str | None, writes: bool):
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"{fn.__qualname__}: a rojo tool must be an async function")
        self.fn = fn
        self.name = name or fn.__name__
        self.writes = writes
        self.default_enabled = False
        description, described = _docstring_parts(fn.__doc__)
        if not description:
            raise TypeError(f"{fn.__qualname__}: the docstring is the model's description")
        self.description = description
        hints = typing.get_type_hints(fn)
        parameters = list(inspect.signature(fn).parameters.values())[1:]  # after ctx
        properties, required = {}, []
        for parameter in parameters:
            where = f"{self.name}({parameter.name})"
            if parameter.name not in hints:
                raise TypeError(f"{where}: every argument needs a type hint")
            schema = _schema(hints[parameter.name], where)
            if parameter.name in described:
                schema["description"] = described[parameter.name]
            properties[parameter.name] = schema
            if parameter.default is inspect.Parameter.empty:
                required.append(parameter.name)
        self.parameters = {"type": "object", "properties": properties, "required": required}

    async def execute(self, args: dict, ctx: RojoToolContext) -> Any:
        return await self.fn(ctx, **args)


def rojo_tool(*, name: str | None = None, writes: bool = False, registry=None):
    """Register an async function as a tool, in the app's registry unless one is given.

    Tools registered this way are off until an administrator enables them on a rojo.
    """

    def register(fn):
        from . import registry as default_registry

        (registry or default_registry).register(FunctionTool(fn, name=name, writes=writes))
        return fn

    return register
