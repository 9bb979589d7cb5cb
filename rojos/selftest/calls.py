"""Probes of tool calls: one forced call, and two calls in one response.

A call counts only once its arguments parse as the JSON object the tool asked for, as the
tool registry would parse them: a stream whose calls run together ("{..}{..}") or lose
their arguments does not work, whatever it looked like.
"""

import json

from rojos.models import capabilities as caps
from rojos.selftest.answers import failed
from rojos.selftest.asks import NOTE_TOOL, user
from rojos.selftest.exchange import Session
from rojos.selftest.results import ProbeResult, does_not, unknown, works

FORCED = {"type": "function", "function": {"name": "note"}}
ONE_CALL = 'Write down the word "alpha" with the note tool.'
TWO_CALLS = (
    'Write down two words with the note tool, "alpha" and "beta": call note twice, both '
    "calls in this one response."
)


def _words(tool_calls: list[dict]) -> list[str | None]:
    """The word of each call to `note`; None for a call whose arguments do not parse."""
    words = []
    for call in tool_calls:
        function = call.get("function") or {}
        try:
            args = json.loads(function.get("arguments") or "")
        except ValueError:
            args = None
        ok = function.get("name") == "note" and isinstance(args, dict)
        words.append(args.get("word") if ok and isinstance(args.get("word"), str) else None)
    return words


def _mentions(error: object, option: str) -> bool:
    return option in str(error)


async def tool_call_probe(session: Session) -> ProbeResult:
    """A call forced with `tool_choice`; where that option is refused, a call asked for."""
    exchange = await session.ask(
        session.request(user(ONE_CALL), tools=[NOTE_TOOL], tool_choice=FORCED)
    )
    forced = True
    if exchange.refused and _mentions(exchange.error, "tool_choice"):
        forced = False
        exchange = await session.ask(session.request(user(ONE_CALL), tools=[NOTE_TOOL]))
    if exchange.error is not None or exchange.completion is None:
        return failed(caps.TOOL_CALL, exchange)
    words = _words(exchange.completion.tool_calls)
    how = "forced with tool_choice" if forced else "tool_choice refused; called when asked"
    if not words:
        return does_not(caps.TOOL_CALL, f"answered in text, no call ({how})", forced=forced)
    if None in words:
        return does_not(caps.TOOL_CALL, "the call's arguments did not parse", forced=forced)
    return works(caps.TOOL_CALL, f"{how}: note({words[0]!r})", forced=forced)


async def parallel_calls_probe(session: Session) -> ProbeResult:
    """Two calls asked for in one response: both whole, or one at a time, or run together.

    A model that makes one call at a time is asked once more with `parallel_tool_calls:
    true` (llama.cpp's server makes parallel calls only when asked), unless the provider
    refused the option.
    """
    result = await _two_calls(session, asked=False)
    if result.detail.get("calls") == 1 and "parallel_tool_calls" not in session.refused:
        again = await _two_calls(session, asked=True)
        if again.status == "works":
            return again
    return result


async def _two_calls(session: Session, *, asked: bool) -> ProbeResult:
    extra = {"parallel_tool_calls": True} if asked else {}
    exchange = await session.ask(session.request(user(TWO_CALLS), tools=[NOTE_TOOL], **extra))
    if exchange.error is not None or exchange.completion is None:
        return failed(caps.PARALLEL_CALLS, exchange)
    words = _words(exchange.completion.tool_calls)
    shape = " (whole calls without index)" if "calls without index" in exchange.shapes else ""
    if not words:
        return unknown(caps.PARALLEL_CALLS, "answered in text, no call")
    if None in words:
        return does_not(caps.PARALLEL_CALLS, "the calls' arguments ran together or did not parse")
    if len(words) == 1:
        return does_not(caps.PARALLEL_CALLS, f"one call at a time: note({words[0]!r})", calls=1)
    when = " when asked (parallel_tool_calls: true)" if asked else ""
    return works(
        caps.PARALLEL_CALLS, f"{len(words)} calls in one response{when}{shape}", asked=asked
    )
