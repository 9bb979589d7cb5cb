"""The probe of the options the app adds on its own: refused ones are found and left out.

A turn may add `stream_options` (usage in the stream), `parallel_tool_calls` (where the
model's calls need it) and the rojo's `reasoning_effort`; providers refuse each (PROVIDERS.md,
"Requests"). One request with them all finds which, if any, is refused, and a retry without it
shows the turn can recover. Later probes of the same test leave the refused ones out.
"""

from rojos.models import capabilities as caps
from rojos.selftest.answers import QUESTION, refusal_text
from rojos.selftest.asks import ADDED_OPTIONS, NOTE_TOOL, user
from rojos.selftest.exchange import Session
from rojos.selftest.results import ProbeResult, does_not, unknown, works


def _request(session: Session) -> dict:
    # parallel_tool_calls needs tools beside it (OpenAI refuses it alone).
    extra: dict = {"tools": [NOTE_TOOL]}
    if "parallel_tool_calls" not in session.refused:
        extra["parallel_tool_calls"] = False
    return session.request(user(QUESTION), **extra)


async def options_probe(session: Session) -> ProbeResult:
    """Send the added options; drop each one a refusal names and send again."""
    exchange = await session.ask(_request(session))
    while exchange.refused:
        named = [o for o in ADDED_OPTIONS if o not in session.refused and o in str(exchange.error)]
        if not named:
            break
        session.refused.update(named)
        exchange = await session.ask(_request(session))
    refused = sorted(session.refused)
    if exchange.error is None and exchange.completion is not None:
        if not refused:
            sent = [o for o in ADDED_OPTIONS if o in _request(session)]
            return works(caps.OPTIONS, "none refused: takes " + " and ".join(sent), refused=[])
        return works(
            caps.OPTIONS, f"refused {', '.join(refused)}; recovered without it", refused=refused
        )
    if exchange.refused:
        return does_not(caps.OPTIONS, f"{refusal_text(exchange)}, even without the added options")
    return unknown(caps.OPTIONS, str(exchange.error)[:300])
