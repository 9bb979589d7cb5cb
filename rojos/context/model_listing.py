"""The models a provider lists (`GET {base_url}/models`), for a rojo that offers any of them.

Asked only when someone asks (the rojo bar's Refresh, or the first time a picker needs the
list), with the rojo's key and to the rojo's own base URL alone; bounded in time and size, and
kept on the rojo's row (`Rojo.provider_models`), so every picker reads the stored list. A
provider that refuses or is down leaves the stored list as it was and says why.
"""

import logging

import httpx2
import orjson
from django.utils import timezone

from roject.errors import AppError
from rojos.context.model_choice import MODELS_SHOWN
from rojos.models import Rojo
from rojos.provider.clients import tls_context

logger = logging.getLogger(__name__)

LIST_SECONDS = 10.0
LIST_MAX_BYTES = 4 * 1024 * 1024
# A list fetched this recently is given again rather than asked for: a click storm asks once.
FRESH_SECONDS = 10.0


class ModelListUnavailable(AppError):
    """The provider did not give its model list: refused, down, slow, or not a list."""


def _names(body) -> list[str]:
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise ModelListUnavailable(
            "The provider's answer to /models is not a model list; this rojo can offer only "
            "the models an administrator lists."
        )
    ids = [entry.get("id") for entry in data if isinstance(entry, dict)]
    names = [name for name in ids if isinstance(name, str) and 0 < len(name) <= 200]
    return sorted(set(names))[:MODELS_SHOWN]


async def _fetch(rojo: Rojo) -> list[str]:
    url = f"{rojo.base_url.rstrip('/')}/models"
    key = rojo.resolved_api_key()
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        async with (
            httpx2.AsyncClient(timeout=LIST_SECONDS, verify=tls_context()) as client,
            client.stream("GET", url, headers=headers) as response,
        ):
            if response.status_code != 200:
                raise ModelListUnavailable(
                    f"The provider answered {response.status_code} to its model list "
                    "(GET /models); check the rojo's key and URL, or try again later."
                )
            body = bytearray()
            async for part in response.aiter_bytes():
                body += part
                if len(body) > LIST_MAX_BYTES:
                    raise ModelListUnavailable("The provider's model list is too large to read.")
    except httpx2.HTTPError as exc:
        logger.info("rojo %s: its model list could not be read: %r", rojo, exc)
        raise ModelListUnavailable(
            "The provider could not be reached for its model list; try again later."
        ) from None
    try:
        return _names(orjson.loads(body))
    except ValueError:
        raise ModelListUnavailable("The provider's model list is not JSON.") from None


async def provider_models_refresh(rojo: Rojo, *, force: bool = True) -> list[str]:
    """The provider's models, fetched again unless fetched within FRESH_SECONDS (or, without
    `force`, ever); stored on the rojo. ModelListUnavailable when the provider does not say."""
    fetched = rojo.provider_models_fetched
    if fetched is not None:
        age = (timezone.now() - fetched).total_seconds()
        if not force or age < FRESH_SECONDS:
            return list(rojo.provider_models or [])
    names = await _fetch(rojo)
    rojo.provider_models, rojo.provider_models_fetched = names, timezone.now()
    await Rojo.objects.filter(pk=rojo.pk).aupdate(
        provider_models=names, provider_models_fetched=rojo.provider_models_fetched
    )
    return names
