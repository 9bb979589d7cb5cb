"""A response's tool calls as their deltas come in (fed by rojos.provider.accumulator), and
the id one that came without an id gets.

Providers disagree on how they stream tool calls (PROVIDERS.md, "Tool-call deltas" and
"Ending a response"): indexes that cannot be trusted, names and ids repeated or empty,
arguments in fragments or whole, a finish reason that says nothing about the calls. The
calls survive all of them with one set of rules and no branching on the provider's name.
"""

import json
import secrets
import string
from dataclasses import dataclass, field

from rojos.errors import ProviderError
from rojos.provider.wire_text import nul_free, nul_replaced

_ID_ALPHABET = string.ascii_letters + string.digits
# The longest call id kept as it came: the columns that hold one (a tool message's, a file
# change's, an approval's) take 200 characters. Providers see none of them (each is sent as
# a hash of nine characters: rojos.provider.request.wire_call_id), so a longer one is
# replaced like a missing one; kept, it failed its result's insert on PostgreSQL and left
# the conversation locked.
CALL_ID_MAX = 200
_KNOWN_CALL_KEYS = frozenset({"index", "id", "type", "function"})


def new_call_id() -> str:
    """An id for a tool call that arrived without one."""
    return "call_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(24))


@dataclass(slots=True)
class StreamedCall:
    id: str | None = None
    index: int | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    def arguments_text(self) -> str:
        return "".join(self.arguments)

    def looks_complete(self) -> bool:
        text = self.arguments_text().strip()
        if not text:
            return False
        try:
            json.loads(text)
        except ValueError:
            return False
        return True


class StreamedCalls:
    """The tool calls of one response, each delta matched to the call it continues.

    Rules (see PROVIDERS.md): a call with a new non-empty id starts a new call; otherwise
    match by index; otherwise continue the last open call. Names and ids are never
    concatenated; arguments are joined and parsed only later, by the tool registry.
    """

    __slots__ = ("_by_id", "_by_index", "calls")

    def __init__(self) -> None:
        self.calls: list[StreamedCall] = []
        self._by_id: dict[str, StreamedCall] = {}
        self._by_index: dict[int, StreamedCall] = {}

    def take(self, raw: dict) -> None:
        """Add one tool-call delta to the call it continues, or start the next call.

        OpenAI sends the id and name once, then the index alone. Others repeat them on
        every delta; Ollama puts every call at index 0 with its own id; Gemini sends whole
        calls with neither id nor index; Poolside changes the id after the first delta;
        DeepSeek, GLM and Kimi may give parallel calls one id at different indexes. A new
        call always brings its name, so a nameless delta continues a call.
        """
        call_id = raw.get("id") or None
        index = raw.get("index") if isinstance(raw.get("index"), int) else None
        function = raw.get("function") or {}
        name = function.get("name") or ""
        if not isinstance(name, str) or not isinstance(call_id, str | None):
            # Stored, such a call would fail every later request of the conversation.
            raise TypeError("a tool call's name or id that is not a string")
        at_index = self._by_index.get(index) if index is not None else None
        call = None
        if call_id and call_id in self._by_id:
            known = self._by_id[call_id]
            if index is None or known.index is None or known.index == index:
                call = known
            else:  # the same id at another index is another call
                call = at_index
        elif call_id and not name and (at_index is not None or (index is None and self.calls)):
            call = at_index if at_index is not None else self.calls[-1]
        elif not call_id and at_index is not None:
            call = at_index
        elif not call_id and index is None and self.calls:
            last = self.calls[-1]
            # Whole calls without id or index (seen from Gemini): a named delta after a
            # complete call, or naming another tool, is the next call, not more of the same.
            starts_new = (
                bool(name) and bool(last.name) and (name != last.name or last.looks_complete())
            )
            call = None if starts_new else last
        if call is None:
            call = StreamedCall(index=index)
            self.calls.append(call)
        if call_id and call.id is None:
            call.id = call_id
        if call_id and call_id not in self._by_id:
            self._by_id[call_id] = call
        if index is not None:
            self._by_index[index] = call
        if name and not call.name:
            call.name = name
        arguments = function.get("arguments")
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments)
        if isinstance(arguments, str) and arguments:
            call.arguments.append(nul_replaced(arguments))
        for key, value in raw.items():
            if key not in _KNOWN_CALL_KEYS and value is not None:
                call.extra[key] = value

    def finished(self, taken: frozenset[str]) -> list[dict]:
        """The calls in stored form, once the response finished; raises ProviderError for a
        call without a name.

        A call without an id, or with one of `taken` (the conversation's earlier calls) or
        of another call here, or one over CALL_ID_MAX, gets a new one: some servers number
        calls per response ("create_directory:0" from vLLM's Kimi parser), and results and
        undo records are matched to calls by id. A NUL in an id, a name or an extra key's
        value becomes U+FFFD (rojos.provider.wire_text), as in the arguments.
        """
        tool_calls = []
        seen: set[str | None] = {None, *taken}
        for call in self.calls:
            if not call.name:
                raise ProviderError("The provider sent a tool call without a name.")
            if call.id is not None:
                call.id = nul_replaced(call.id)
            if call.id in seen or len(call.id) > CALL_ID_MAX:
                call.id = new_call_id()
            seen.add(call.id)
            tool_calls.append(
                {
                    **nul_free(call.extra),
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": nul_replaced(call.name),
                        "arguments": call.arguments_text(),
                    },
                }
            )
        return tool_calls

    def so_far(self) -> list[dict]:
        """The calls as far as they came, unchecked: for counting what a response that did
        not finish used, never to run or store."""
        return [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_text()},
            }
            for call in self.calls
        ]
