"""An MCP tool's input schema, cleaned to the JSON-schema subset our own tools send.

Strict providers reject `$ref`, `anyOf`, `additionalProperties`, `default`, `format` and the
like (see rojos/tools/schema.py), so references are inlined, optional types (`X | None`)
become `X`, and only `type`, `properties`, `required`, `description`, `enum` and `items`
are kept. The server still validates the arguments against its own schema.
"""

from typing import Any

_KEPT = ("description", "enum")
_TYPES = {"object", "array", "string", "integer", "number", "boolean"}
_MAX_DEPTH = 8


def clean_schema(schema: Any) -> dict:
    """The cleaned schema of a tool's parameters: always an object."""
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    cleaned = _clean(schema, schema.get("$defs") or schema.get("definitions") or {}, 0)
    if cleaned.get("type") != "object":
        return {"type": "object", "properties": {}}
    cleaned.setdefault("properties", {})
    return cleaned


def _resolve(schema: dict, defs: dict) -> dict:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.rsplit("/", 1)[-1] in defs:
        target = defs[ref.rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return merged if isinstance(target, dict) else {}
    return schema


def _one_type(schema: dict, defs: dict) -> dict:
    """`anyOf`/`oneOf` of one type and null (an optional value) as that one type."""
    options = schema.get("anyOf") or schema.get("oneOf")
    if not isinstance(options, list):
        return schema
    real = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
    if len(real) != 1:
        return {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
    rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
    return {**_resolve(real[0], defs), **rest}


def _clean(schema: Any, defs: dict, depth: int) -> dict:
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return {}
    schema = _one_type(_resolve(schema, defs), defs)
    out: dict[str, Any] = {}
    kind = schema.get("type")
    if isinstance(kind, list):  # ["string", "null"]
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind in _TYPES:
        out["type"] = kind
    for key in _KEPT:
        if key in schema:
            out[key] = schema[key]
    if kind == "object":
        properties = schema.get("properties")
        if isinstance(properties, dict):
            out["properties"] = {
                str(name): _clean(value, defs, depth + 1) for name, value in properties.items()
            }
        required = schema.get("required")
        if isinstance(required, list) and "properties" in out:
            out["required"] = [r for r in required if r in out["properties"]]
    if kind == "array" and isinstance(schema.get("items"), dict):
        out["items"] = _clean(schema["items"], defs, depth + 1)
    return out
