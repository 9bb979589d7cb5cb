"""An audit entry's details on a page: compact JSON, escaped like any other text."""

import json

from django import template

register = template.Library()


@register.filter
def as_json(value) -> str:
    """The value as one line of JSON (the page escapes it: paths may hold markup)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
