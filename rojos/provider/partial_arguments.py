"""Reading a tool call's JSON arguments while they still stream, without ever parsing a fragment.

The activity line of a forming call shows its path as soon as that part has arrived, and the
text a write or an edit is putting in. `json.loads` on a fragment fails (or, worse, succeeds
on a prefix), so this is a small incremental scanner instead: it follows the structure of the
JSON text one fragment at a time, keeps the top-level string values of a few keys once they
are complete, and decodes the text of the streamed keys as it comes, escapes included, even
when a fragment ends inside one. It never raises: whatever it cannot make sense of is skipped,
and the arguments are parsed for real, once, when the response is complete.
"""

import re

# Top-level keys whose complete string value names what the call works on.
NAMED_KEYS = frozenset({"path", "source", "destination"})
# Keys (at any depth) whose string value is the text being written.
STREAMED_KEYS = frozenset({"text", "new_text"})
# Top-level keys whose value is a list of objects whose complete string values are kept, one
# dict per object (update_plan's steps, drawn while the plan is written).
LISTED_KEYS = frozenset({"plan"})
_MAX_NAME = 4096  # a watched value longer than this is not a path worth showing
_MAX_KEY = 128
_MAX_ITEMS = 100  # objects kept of a listed key's list
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r"}
_SIMPLE_ESCAPES["t"] = "\t"
_STRING_STOP = re.compile(r'["\\]')
_STRUCTURE = re.compile(r'[{}\[\]":,]')
_HEX = frozenset("0123456789abcdefABCDEF")


class ArgumentScanner:
    """Follows a JSON object as its text arrives in fragments (`feed`).

    `names` holds the complete top-level string values of NAMED_KEYS; `items`, for each of
    LISTED_KEYS, the complete string values of each object of its list so far; `take_text()`
    gives the decoded text of STREAMED_KEYS values that arrived since it was last called.
    """

    def __init__(self) -> None:
        self.chars = 0
        self.names: dict[str, str] = {}
        self.items: dict[str, list[dict[str, str]]] = {}
        self._list = ""  # the LISTED_KEYS key whose list is being read
        self._stack: list[str] = []  # "o" object, "a" array
        self._expect_key = False  # in an object, before a key
        self._key = ""  # the key of the value being read, in the innermost object
        self._in_string = False
        self._string_is_key = False
        self._string: list[str] = []  # a key's or a named value's text
        self._keep = ""  # "key", "name" or "text": what the current string is read for
        self._escape = ""  # an escape cut by the end of a fragment: "\\", "\\u12", ...
        self._high = ""  # a high surrogate waiting for its low half
        self._text: list[str] = []
        self._texts = 0  # streamed values seen, to put a line between two of them

    def feed(self, fragment: str) -> None:
        """Take the next fragment of the arguments' text."""
        self.chars += len(fragment)
        position = 0
        end = len(fragment)
        while position < end:
            if self._in_string:
                position = self._in_string_part(fragment, position)
            else:
                position = self._structure_part(fragment, position)

    def take_text(self) -> str:
        """The streamed text decoded since the last call."""
        text = "".join(self._text)
        self._text.clear()
        return text

    def _structure_part(self, fragment: str, position: int) -> int:
        match = _STRUCTURE.search(fragment, position)
        if match is None:
            return len(fragment)
        char = match.group()
        if char == '"':
            self._string_start()
        elif char in "{[":
            if self._stack == ["o"] and char == "[":
                self._list = self._key if self._key in LISTED_KEYS else ""
            elif self._stack == ["o", "a"] and char == "{" and self._list:
                listed = self.items.setdefault(self._list, [])
                if len(listed) < _MAX_ITEMS:
                    listed.append({})
                else:
                    self._list = ""
            self._stack.append("o" if char == "{" else "a")
            self._expect_key = char == "{"
            if char == "{":
                self._key = ""
        elif char in "}]":
            if self._stack:
                self._stack.pop()
            if len(self._stack) < 2:
                self._list = ""
            self._expect_key = False
        elif char == ",":
            self._expect_key = bool(self._stack) and self._stack[-1] == "o"
        return match.end()

    def _string_start(self) -> None:
        self._in_string = True
        self._string_is_key = self._expect_key
        self._string.clear()
        depth = len(self._stack)
        if self._string_is_key:
            self._keep = "key"
        elif depth == 1 and self._stack[0] == "o" and self._key in NAMED_KEYS:
            self._keep = "name"
        elif self._list and self._stack == ["o", "a", "o"]:
            self._keep = "item"
        elif self._stack and self._stack[-1] == "o" and self._key in STREAMED_KEYS:
            self._keep = "text"
            if self._texts:
                self._text.append("\n")
            self._texts += 1
        else:
            self._keep = ""

    def _in_string_part(self, fragment: str, position: int) -> int:
        if self._escape:
            return self._escape_part(fragment, position)
        match = _STRING_STOP.search(fragment, position)
        stop = match.start() if match else len(fragment)
        if stop > position:
            self._flush_high()
            self._take(fragment[position:stop])
        if match is None:
            return stop
        if match.group() == "\\":
            self._escape = "\\"
            return self._escape_part(fragment, stop + 1)
        self._string_end()
        return stop + 1

    def _escape_part(self, fragment: str, position: int) -> int:
        """Continue an escape; the fragment may end before it does."""
        while position < len(fragment):
            char = fragment[position]
            position += 1
            if self._escape == "\\":
                if char == "u":
                    self._escape = "\\u"
                    continue
                self._escape = ""
                self._flush_high()
                self._take(_SIMPLE_ESCAPES.get(char, char))
                return position
            if char not in _HEX:  # a broken \u escape: keep what can be kept, go on
                self._escape = ""
                self._flush_high()
                return position - 1
            self._escape += char
            if len(self._escape) == 6:
                code = int(self._escape[2:], 16)
                self._escape = ""
                self._take_code(code)
                return position
        return position

    def _take_code(self, code: int) -> None:
        if 0xD800 <= code < 0xDC00:
            self._flush_high()
            self._high = chr(code)
        elif 0xDC00 <= code < 0xE000 and self._high:
            pair = 0x10000 + ((ord(self._high) - 0xD800) << 10) + (code - 0xDC00)
            self._high = ""
            self._take(chr(pair))
        else:
            self._flush_high()
            self._take("\ufffd" if 0xDC00 <= code < 0xE000 else chr(code))

    def _flush_high(self) -> None:
        if self._high:  # a high surrogate with no low half after it
            self._high = ""
            self._take("\ufffd")

    def _take(self, text: str) -> None:
        if self._keep == "text":
            self._text.append(text)
        elif self._keep == "key":
            if sum(map(len, self._string)) < _MAX_KEY:
                self._string.append(text)
        elif self._keep in ("name", "item"):
            self._string.append(text)
            if sum(map(len, self._string)) > _MAX_NAME:
                self._keep = ""

    def _string_end(self) -> None:
        self._flush_high()
        self._in_string = False
        if self._keep == "key":
            self._key = "".join(self._string)
            self._expect_key = False
        elif self._keep == "name" and self._key not in self.names:
            self.names[self._key] = "".join(self._string)
        elif self._keep == "item":
            self.items[self._list][-1][self._key] = "".join(self._string)
        self._string.clear()
        self._keep = ""
