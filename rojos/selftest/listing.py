"""The probe of what the provider lists: its models, and the model's context window.

The window is read where each server lists it (`rojos.context.discovery`: /v1/models,
llama.cpp's /props, Ollama's /api/show, LM Studio's /api/v0/models), all on the rojo's own
server; the model list through the rojo's client.
"""

import asyncio

import openai
from django.conf import settings

from rojos.context.discovery import window_listed
from rojos.models import capabilities as caps
from rojos.provider.clients import request_options
from rojos.selftest.exchange import Session
from rojos.selftest.results import ProbeResult, does_not, unknown, works


async def _model_ids(session: Session) -> list[str] | None:
    """The models the provider lists; None when it lists none (or failed to)."""
    try:
        async with asyncio.timeout(min(session.limits.seconds_each, max(session.left(), 0.1))):
            page = await session.client.models.list(extra_headers=request_options()["headers"])
    except (openai.OpenAIError, TimeoutError, ValueError):
        return None
    return [model.id for model in page.data][:500]


async def listing_probe(session: Session) -> ProbeResult:
    """The window listed for the model (learned, kept on the rojo) and the models listed."""
    seconds = settings.ROJO_WINDOW_PROBE_SECONDS
    ids, window = await asyncio.gather(
        _model_ids(session),
        window_listed(session.rojo, session.model, seconds=seconds),
    )
    if ids is None:
        models = "no model list"
    else:
        among = "among them" if session.model in ids else "not among them"
        models = f"{len(ids)} model{'s' if len(ids) != 1 else ''} listed, {session.model!r} {among}"
    listed = {"models": len(ids) if ids is not None else None}
    if window:
        return works(caps.LISTING, f"window {window:,} tokens; {models}", window=window, **listed)
    if ids is None:
        return unknown(caps.LISTING, "neither a window nor a model list answered", **listed)
    return does_not(caps.LISTING, f"no window listed; {models}", **listed)
