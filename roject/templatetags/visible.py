"""Names in templates with their hidden characters shown as escapes, as static/rojo/visible.js
shows them on the page: the same set, the same markup.

`{{ name|visible }}` gives escaped HTML with each hidden character a highlighted `⟨U+202E⟩`;
`{{ name|visible_text }}` gives text, for what cannot hold markup (a page title, an attribute).
"""

import re

from django import template
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

# Every control character but tab and newline, and every format, bidi, zero-width, filler,
# variation selector and tag character (static/rojo/visible.js: HIDDEN).
HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    "\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f\U000e0100-\U000e01ef]"
)

NAMES = {
    0x00AD: "soft hyphen",
    0x061C: "Arabic letter mark",
    0x180E: "Mongolian vowel separator",
    0x200B: "zero width space",
    0x200C: "zero width non-joiner",
    0x200D: "zero width joiner",
    0x200E: "left-to-right mark",
    0x200F: "right-to-left mark",
    0x2028: "line separator",
    0x2029: "paragraph separator",
    0x202A: "left-to-right embedding",
    0x202B: "right-to-left embedding",
    0x202C: "pop directional formatting",
    0x202D: "left-to-right override",
    0x202E: "right-to-left override",
    0x2060: "word joiner",
    0x2066: "left-to-right isolate",
    0x2067: "right-to-left isolate",
    0x2068: "first strong isolate",
    0x2069: "pop directional isolate",
    0xFEFF: "zero width no-break space",
}


def _code(char: str) -> str:
    return f"U+{ord(char):04X}"


def _describe(char: str) -> str:
    name = NAMES.get(ord(char), "an invisible or control character")
    return f"{_code(char)}, {name}: shown, not applied"


@register.filter(needs_autoescape=True)
def visible(value, autoescape: bool = True) -> SafeString:
    """`value` as HTML, each hidden character a `<span class="hidden-char">⟨U+XXXX⟩</span>`."""
    text = str(value)
    escape = conditional_escape if autoescape else str
    parts = []
    last = 0
    for match in HIDDEN.finditer(text):
        char = match.group()
        parts.append(escape(text[last : match.start()]))
        parts.append(
            format_html(
                '<span class="hidden-char" title="{}">⟨{}⟩</span>', _describe(char), _code(char)
            )
        )
        last = match.end()
    parts.append(escape(text[last:]))
    return mark_safe("".join(parts))


@register.filter
def visible_text(value) -> str:
    """`value` as text, each hidden character written `⟨U+XXXX⟩`."""
    return HIDDEN.sub(lambda match: f"⟨{_code(match.group())}⟩", str(value))
