"""Learning a model's context window from its provider, where the provider says.

vLLM lists `max_model_len` in /v1/models, OpenRouter (and some gateways) `context_length`;
llama.cpp's `llama-server` gives `n_ctx` in /props; Ollama's /api/show gives the model's
`num_ctx` parameter (without one, Ollama runs it with its default of 4,096, whatever the
model could take: over that it silently cuts the prompt's start); LM Studio's
/api/v0/models/<model> its loaded or maximum context length. The places are asked at once,
with a short timeout, never on the event loop's time for long: what is learned is kept in
the rojo's row, and a provider that says nothing is asked again only after an hour.
"""

import asyncio
import contextlib
import logging
import time
from typing import Any

import httpx2
from django.conf import settings

from rojos.context.model_choice import ModelInUse
from rojos.models import Rojo
from rojos.provider.clients import tls_context

logger = logging.getLogger(__name__)

# Ollama's own default when a model has no num_ctx and the server no OLLAMA_CONTEXT_LENGTH.
OLLAMA_DEFAULT_NUM_CTX = 4096
_ASK_AGAIN_SECONDS = 3600
# (base URL, model) -> when it was asked, and the window learned (None: it did not say).
_asked: dict[tuple[str, str], tuple[float, int | None]] = {}
# (base URL, model) -> the probe under way: a burst of first turns asks the provider once.
_probing: dict[tuple[str, str], asyncio.Task] = {}


def window_discovery_forget() -> None:
    """Forget what was learned in this process (tests; a changed provider)."""
    _asked.clear()


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _from_listing(body: Any, model: str) -> int | None:
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    entries = [e for e in data if isinstance(e, dict)]
    entry = next((e for e in entries if e.get("id") == model), None)
    if entry is None and len(entries) == 1:
        entry = entries[0]  # a local server that serves one model under another name
    if entry is None:
        return None
    top = entry.get("top_provider")
    return (
        _positive(entry.get("max_model_len"))
        or _positive(entry.get("context_length"))
        or _positive(entry.get("max_context_length"))
        or _positive(entry.get("context_window"))
        or (_positive(top.get("context_length")) if isinstance(top, dict) else None)
    )


def _from_props(body: Any) -> int | None:
    if not isinstance(body, dict):
        return None
    settings_ = body.get("default_generation_settings")
    nested = settings_.get("n_ctx") if isinstance(settings_, dict) else None
    return _positive(nested) or _positive(body.get("n_ctx"))


def _from_show(body: Any) -> int | None:
    if not isinstance(body, dict) or not ("model_info" in body or "parameters" in body):
        return None
    for line in str(body.get("parameters") or "").splitlines():
        name, _, value = line.partition(" ")
        if name == "num_ctx" and value.strip().isdigit():
            return int(value.strip())
    return OLLAMA_DEFAULT_NUM_CTX


def _from_lmstudio(body: Any) -> int | None:
    if not isinstance(body, dict):
        return None
    return _positive(body.get("loaded_context_length")) or _positive(body.get("max_context_length"))


def _server_root(base_url: str) -> str:
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


async def _ask(client: httpx2.AsyncClient, method: str, url: str, **kwargs) -> Any:
    with contextlib.suppress(httpx2.HTTPError, ValueError):
        response = await client.request(method, url, **kwargs)
        if response.status_code == 200:
            return response.json()
    return None


async def _listed_window(base_url: str, model: str, api_key: str, seconds: float) -> int | None:
    root = _server_root(base_url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with httpx2.AsyncClient(timeout=seconds, headers=headers, verify=tls_context()) as client:
        answers = await asyncio.gather(
            _ask(client, "GET", f"{base_url.rstrip('/')}/models"),
            _ask(client, "GET", f"{root}/props"),
            _ask(client, "POST", f"{root}/api/show", json={"model": model}),
            _ask(client, "GET", f"{root}/api/v0/models/{model}"),
        )
    listing, props, show, lmstudio = answers
    return (
        _from_listing(listing, model)
        or _from_props(props)
        or _from_show(show)
        or _from_lmstudio(lmstudio)
    )


async def window_listed(rojo: Rojo, model: str, *, seconds: float) -> int | None:
    """The window the rojo's provider lists for `model`, asked now (the provider self-test),
    within `seconds`; None when no place says."""
    try:
        async with asyncio.timeout(seconds):
            return await _listed_window(rojo.base_url, model, rojo.resolved_api_key(), seconds)
    except TimeoutError:
        return None


async def _window_probe(model: ModelInUse) -> int | None:
    rojo = model.rojo
    seconds = settings.ROJO_WINDOW_PROBE_SECONDS
    window = None
    try:
        async with asyncio.timeout(seconds):
            window = await _listed_window(
                rojo.base_url, model.name, rojo.resolved_api_key(), seconds
            )
    except TimeoutError:
        logger.info("rojo %s: the provider did not list its window in %gs", rojo, seconds)
    _asked[(rojo.base_url, model.name)] = (time.monotonic(), window)
    return window


async def window_learn(model: ModelInUse) -> None:
    """Learn the window of a rojo's model from its provider if it has none declared or learned.

    Bounded by ROJO_WINDOW_PROBE_SECONDS; a provider that does not answer in time, or says
    nothing, leaves the default in use. What is learned is stored with the model (the
    rojo's row for its default model, else the model's option: rojos.context.model_choice).
    """
    if model.context_window or model.listed_window:
        return
    key = (model.rojo.base_url, model.name)
    asked = _asked.get(key)
    if asked is not None and time.monotonic() - asked[0] < _ASK_AGAIN_SECONDS:
        model.listed_window = asked[1]
        return
    probe = _probing.get(key)
    asks = probe is None or probe.get_loop() is not asyncio.get_running_loop()
    if asks:
        probe = _probing[key] = asyncio.ensure_future(_window_probe(model))
        probe.add_done_callback(lambda done: _probing.pop(key) if _probing.get(key) is done else 0)
    window = await asyncio.shield(probe)
    if window and asks:  # stored once, by the turn that asked
        await model.learned_save(listed_window=window)
    elif window:
        model.listed_window = window
