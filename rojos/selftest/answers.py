"""Probes of a plain answer: streamed text, usage in the stream, the reasoning's shape, an image.

The usage and reasoning probes read the streamed answer's exchange rather than asking
again: one short question shows all three.
"""

import re

from rojos.models import capabilities as caps
from rojos.selftest.asks import image_message, user
from rojos.selftest.exchange import Exchange, Session
from rojos.selftest.results import ProbeResult, does_not, unknown, works

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
QUESTION = "What is 17 + 25? Answer with the number only."
_STREAMED = "streamed"  # the Session.memo key of the streamed answer's exchange
# The reasoning shapes, as the table names them (PROVIDERS.md, "Reasoning (thinking) text").
_REASONING = {
    "reasoning_content": "a reasoning_content field",
    "reasoning": "a reasoning field",
    "thinking parts": "typed thinking parts in content",
    "think tags": "<think> tags in content",
    caps.CLOSING_THINK_TAG: "thinking in content, ended by </think> (opened in the prompt)",
}


def failed(capability: str, exchange: Exchange) -> ProbeResult:
    """A probe whose request failed: refused (does not) or anything else (unknown)."""
    if exchange.refused:
        return does_not(capability, refusal_text(exchange), status=exchange.status)
    return unknown(capability, str(exchange.error)[:300])


def refusal_text(exchange: Exchange) -> str:
    """A refusal in the provider's own words (its key already scrubbed by the reader)."""
    words = str(exchange.error).split(f"answered {exchange.status}: ", 1)[-1]
    return f"refused ({exchange.status}): {words[:300]}"


def brief(text: str, length: int = 40) -> str:
    if "</think>" in text and "<think>" not in text:  # thinking opened in the prompt
        text = text.rpartition("</think>")[2]
    text = " ".join(_THINK.sub("", text).split())
    return repr(text if len(text) <= length else text[: length - 1] + "…")


async def stream_probe(session: Session) -> ProbeResult:
    """A short question, answered as a stream of text deltas that ends with a finish reason."""
    exchange = await session.ask(session.request(user(QUESTION)))
    session.memo[_STREAMED] = exchange
    if exchange.error is not None or exchange.completion is None:
        return failed(caps.STREAM, exchange)
    text = exchange.completion.text
    if not text.strip():
        return does_not(caps.STREAM, "the answer had no text")
    late = exchange.late_error
    # The answer stands, as in a chat (which shows a notice); what failed after it, or a
    # connection kept open, is worth a look all the same.
    after = f" (kept, as a chat keeps it; after its finish reason: {late})" if late else ""
    return works(caps.STREAM, f"answered {brief(text)}{after}")


async def usage_probe(session: Session) -> ProbeResult:
    """Whether the stream reports the tokens used (its last chunk), or usage is estimated."""
    exchange = session.memo.get(_STREAMED)
    if not isinstance(exchange, Exchange) or exchange.completion is None:
        return unknown(caps.USAGE, "the streamed answer failed")
    if exchange.completion.usage:
        where = sorted(s for s in exchange.shapes if "usage" in s)
        asked = "stream_options" not in session.refused
        how = ", ".join(where) or "in the stream"
        return works(caps.USAGE, f"{how}{'' if asked else ', without stream_options'}")
    if "stream_options" in session.refused:
        return does_not(caps.USAGE, "stream_options refused: usage is estimated")
    return does_not(caps.USAGE, "no usage in the stream: usage is estimated")


async def reasoning_probe(session: Session) -> ProbeResult:
    """The shape the model's thinking streams in, if it shows any."""
    exchange = session.memo.get(_STREAMED)
    if not isinstance(exchange, Exchange):
        return unknown(caps.REASONING, "the streamed answer failed")
    for shape, label in _REASONING.items():
        if shape in exchange.shapes:  # seen, even in an answer cut off at the limits
            return works(caps.REASONING, label, shape=shape)
    if exchange.completion is None:
        return unknown(caps.REASONING, "the streamed answer failed")
    return does_not(caps.REASONING, "no reasoning in the stream")


async def images_probe(session: Session) -> ProbeResult:
    """A tiny image in the message: taken (answered) or refused."""
    exchange = await session.ask(session.request(image_message()))
    if exchange.error is not None or exchange.completion is None:
        return failed(caps.IMAGES, exchange)
    return works(caps.IMAGES, f"answered {brief(exchange.completion.text)}")
