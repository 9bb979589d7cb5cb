"""Audit entries for changes to how rojos and MCP servers are configured.

An entry names the fields that changed. For a field that holds no secret it also gives
the old and the new value, cut short; for one that may (a rojo's API key and request
options, an MCP server's variables, headers, URL and arguments), the names only, never a
value.
"""

import json

from django.db import models

from roject.audit.log import AuditAction, AuditActor, audit_record, audit_text

_VALUE_LENGTH = 80
# An MCP server's URL (a query may carry a key) and command arguments (`--api-key …`) may
# hold secrets too: their names only.
MCP_NAMES_ONLY = frozenset({"url", "args"})


def short_value(value):
    """A value for an entry's details: plain JSON, long text cut to a few words."""
    if isinstance(value, models.Model):
        value = str(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    return audit_text(value if isinstance(value, str) else repr(value), _VALUE_LENGTH)


def field_changes(
    *, fields: list[str], before: dict, after: dict, names_only: frozenset[str]
) -> dict:
    """Details for changed `fields`: their names, and from/to of those not in `names_only`.

    A field a form calls changed whose value is the same (a JSON field's `[]` posted back)
    is left out."""
    fields = [name for name in fields if name not in before or not _same(before, after, name)]
    values = {
        name: {"from": short_value(before.get(name)), "to": short_value(after.get(name))}
        for name in fields
        if name not in names_only
    }
    return {"fields": sorted(fields), "values": values}


def _same(before: dict, after: dict, name: str) -> bool:
    dumped = [json.dumps(side.get(name), sort_keys=True, default=str) for side in (before, after)]
    return dumped[0] == dumped[1]


def config_audit(
    *, action: AuditAction, obj: models.Model, actor: AuditActor, details: dict
) -> None:
    """(Blocking) One entry for a rojo's or an MCP server's configuration change."""
    audit_record(action=action, actor=actor, obj=obj, details=details)
