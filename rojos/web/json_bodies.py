"""The API's JSON request bodies, each NUL in their text replaced (rojos.provider.wire_text):
PostgreSQL refuses one in a text column, so a chat message holding one failed with a 500.
"""

import json

from django.http import HttpRequest
from ninja.parser import Parser

from rojos.provider.wire_text import nul_escapes_replaced


class JsonBodies(Parser):
    """django-ninja's JSON parser, NULs replaced by U+FFFD (a check of the body's bytes)."""

    def parse_body(self, request: HttpRequest):
        body = request.body
        if b"\\u0000" in body:
            body = nul_escapes_replaced(body)
        return json.loads(body)
