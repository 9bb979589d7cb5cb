"""Printing a turn's wire events for people (text) or programs (NDJSON, SSE)."""

import json
from collections.abc import Callable

from rojos.agent.events import WireEvent
from rojos.web.wire import encode_ndjson, encode_sse


def _result_text(data: dict) -> str:
    if data["ok"]:
        return "→ ok"
    result = data["result"]
    message = result.get("error") if isinstance(result, dict) else result
    return f"→ error: {message}"


class EventPrinter:
    """Writes events to a stream: `text` for a terminal, or the endpoint's `ndjson` / `sse`."""

    def __init__(self, write: Callable[[str], None], format: str = "text") -> None:
        self.out_write = write
        self.format = format
        self._text_open = False

    def _line(self, line: str) -> None:
        self.out_write(("\n" if self._text_open else "") + line + "\n")
        self._text_open = False

    def user(self, text: str) -> None:
        """The user's message (shown in text format only: the wire carries just its id)."""
        if self.format == "text":
            self._line("> " + text.replace("\n", "\n  "))

    def write(self, event: WireEvent) -> None:
        if self.format == "ndjson":
            self.out_write(encode_ndjson(event).decode())
            return
        if self.format == "sse":
            self.out_write(encode_sse(event).decode())
            return
        data = event.data
        match event.type:
            case "START":
                self._line(f"[conversation {data['conversation']}]")
            case "CHAT":
                self.out_write(data["text"])
                self._text_open = True
            case "TOOL_CALL":
                self._line(f"⚙ {data['name']}({json.dumps(data['args'], ensure_ascii=False)})")
            case "TOOL_RESULT":
                self._line("  " + _result_text(data))
            case "SUMMARY":
                self._line(f"[earlier conversation summarised: {data['messages']} messages]")
            case "NOTICE":
                self._line(f"NOTE: {data['message']}")
            case "ERROR":
                self._line(f"ERROR: {data['message']}")
            case "DONE":
                if self._text_open:
                    self.out_write("\n")
                    self._text_open = False
