"""Strict validation of tool arguments against the plain JSON-schema subset tools declare.

Providers are sent only `type`, `properties`, `required`, `description`, `enum` and `items`
(some reject more); the checking happens here instead, and unknown arguments are refused.
"""

from typing import Any

from .outcome import ToolError

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


class ArgumentError(ToolError, ValueError):
    """Arguments that do not match the tool's schema."""


def validate(value: Any, schema: dict, where: str = "arguments") -> None:
    """Raise ArgumentError naming the first thing wrong with `value`."""
    expected = schema.get("type")
    if expected is not None:
        ok = isinstance(value, _TYPES[expected])
        if expected in ("integer", "number") and isinstance(value, bool):
            ok = False
        if not ok:
            raise ArgumentError(f"{where} must be of type {expected}")
    if "enum" in schema and value not in schema["enum"]:
        raise ArgumentError(f"{where} must be one of {schema['enum']!r}")
    if expected == "object":
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                raise ArgumentError(f"missing required argument {name!r}")
        for name, item in value.items():
            if name not in properties:
                allowed = ", ".join(repr(p) for p in properties) or "none"
                raise ArgumentError(f"unexpected argument {name!r} (allowed: {allowed})")
            validate(item, properties[name], f"argument {name!r}")
    if expected == "array" and "items" in schema:
        for i, item in enumerate(value):
            validate(item, schema["items"], f"{where}[{i}]")
