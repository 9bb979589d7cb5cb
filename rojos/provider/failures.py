"""What a provider's failure tells the user: the provider's own words, a hint, no API key.

Providers put their error in different shapes (an object, a FastAPI list of fields, a JSON
array from Gemini, OpenRouter's upstream error inside its own); the user sees the human part
of any of them, with a hint per HTTP status and the rojo's key scrubbed out, whole or in
part. Transport failures say which provider, and what to check: where the rojo at hand has
its base URL and key set (`rojo_fixes`), the environment for the demo rojo, the admin for others.
"""

from __future__ import annotations

import contextlib
import html
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx2

from rojos.models import Rojo
from rojos.models.rojo import DEMO_SLUG
from rojos.scrub import scrub

# The SDK (openai, over a second to import) is imported where it is used: the URLconf
# reaches this module, so every management command would pay for it. A server imports
# it at start (rojos/eager.py).
if TYPE_CHECKING:
    import openai


@dataclass(frozen=True, kw_only=True, slots=True)
class Fixes:
    """Where a failure tells the user to put a rojo's base URL, model and key right."""

    base_url: str = "the rojo's base URL (in the admin)"
    endpoint: str = "the rojo's base URL and model name (in the admin)"
    key: str = "the rojo's API key (in the admin)"


ANY_ROJO = Fixes()


def rojo_fixes(rojo: Rojo) -> Fixes:
    """Where this rojo's base URL, model and key are set: the demo rojo's base URL and model
    come from the environment of `make run` (manage.py demo), every other rojo's from its page
    in the admin; a key stored in the admin wins over the variable the rojo names."""
    page = f"the rojo {rojo.name!r} in the admin"
    if rojo.slug == DEMO_SLUG:
        base_url = "the demo rojo's base URL (make run sets it from ROJO_BASE_URL)"
        endpoint = "ROJO_BASE_URL and ROJO_MODEL, which make run sets the demo rojo's from"
    else:
        base_url = f"the base URL of {page}"
        endpoint = f"the base URL and model name of {page}"
    if rojo.api_key or not rojo.api_key_env:
        key = f"the API key of {page}"
    else:
        key = f"{rojo.api_key_env} in the server's environment, or the API key of {page}"
    return Fixes(base_url=base_url, endpoint=endpoint, key=key)


def error_text(error: Any) -> str:
    """The human part of a provider's error body, whatever its shape, in 500 characters."""
    return _error_text(error)[:500]


def _error_text(error: Any) -> str:
    if isinstance(error, list):
        if error and all(isinstance(item, dict) and "msg" in item for item in error):
            return "; ".join(_invalid_field(item) for item in error)  # FastAPI's 422 (Mistral)
        return _error_text(error[0]) if error else ""
    if isinstance(error, str):
        return _page_words(error)
    if not isinstance(error, dict):
        return str(error)
    inner = error.get("error")
    if inner is not None and inner is not error:
        return _error_text(inner)
    message = error.get("message") or error.get("detail") or error.get("msg")
    if not message:
        return json.dumps(error)
    text = message if isinstance(message, str) else _error_text(message)
    metadata = error.get("metadata")
    raw = metadata.get("raw") if isinstance(metadata, dict) else None
    if raw:  # OpenRouter: the upstream provider's own error
        with contextlib.suppress(ValueError, TypeError):
            raw = json.loads(raw)
        text += f" ({_error_text(raw)})"
    return text


_HTML_PAGE = re.compile(r"\s*<(!doctype|html|head|body)\b", re.IGNORECASE)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_HIDDEN = re.compile(r"<(script|style)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")


def _page_words(text: str) -> str:
    """A proxy's HTML error page (nginx's 502, a gateway's 504) as what it says: its title,
    or else its text, never its markup."""
    if not _HTML_PAGE.match(text):
        return text
    title = _TITLE.search(text)
    words = title.group(1) if title else _TAG.sub(" ", _HIDDEN.sub(" ", text))
    return " ".join(html.unescape(words).split())


def _invalid_field(item: dict) -> str:
    """One field a FastAPI server refused: where, then why (never the input it echoes)."""
    where = ".".join(str(part) for part in item.get("loc") or () if part != "body")
    return f"{where}: {item['msg']}" if where else str(item["msg"])


def failure_message(exc: Exception, client: openai.AsyncOpenAI, fixes: Fixes) -> str:
    """The message for a failed request or read: an HTTP status, a timeout, a broken stream."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        return _status_message(exc, client, fixes)
    if isinstance(exc, openai.APIConnectionError):  # APITimeoutError included
        if _timed_out(exc):
            return (
                f"The provider at {client.base_url} did not answer in time "
                "(ROJO_PROVIDER_HEADERS_TIMEOUT). Check that it is running and not overloaded."
            )
        return (
            f"Could not connect to the provider at {client.base_url}. Check that it is running "
            f"and that {fixes.base_url} is right."
        )
    if isinstance(exc, (TimeoutError, httpx2.TimeoutException)):
        return (
            f"The provider at {client.base_url} stopped sending mid-response for longer "
            "than its timeout (ROJO_PROVIDER_TIMEOUT)."
        )
    return (
        f"The connection to the provider at {client.base_url} broke mid-response "
        f"({exc.__class__.__name__})."
    )


def _timed_out(exc: BaseException) -> bool:
    """Whether a transport failure was a timeout, judged by its first cause.

    The SDK's aiohttp adapter maps every aiohttp connection error, a refused connection
    included, to a connect *timeout*; aiohttp's own exception says what happened.
    """
    import aiohttp  # here: a management command needs no HTTP client (rojos/eager.py)
    import openai

    while exc.__cause__ is not None:
        exc = exc.__cause__
    if isinstance(exc, aiohttp.ClientError):
        return isinstance(exc, TimeoutError)
    return isinstance(exc, (TimeoutError, httpx2.TimeoutException, openai.APITimeoutError))


_HINTS = {
    400: "The provider rejected the request.",
    401: "The provider rejected the API key: set {key}.",
    403: "The provider refused access with this API key.",
    404: "The model or endpoint was not found: check {endpoint} (a base URL usually ends in /v1).",
    408: "The provider timed out.",
    413: "The request was too large for the provider.",
    422: "The provider could not process the request.",
    429: "The provider is rate-limiting or the quota is used up; try again later.",
}


_REDIRECTED = (
    "The provider redirected the request elsewhere, which Rojo does not follow (a turn's "
    "request goes only to the rojo's base URL): set the base URL to where it leads."
)


def _status_message(exc: openai.APIStatusError, client: openai.AsyncOpenAI, fixes: Fixes) -> str:
    status = exc.status_code
    if 300 <= status < 400:
        hint = _REDIRECTED
    else:
        hint = _HINTS.get(status, "The provider failed." if status >= 500 else "")
        hint = hint.format(key=fixes.key, endpoint=fixes.endpoint)
    detail = scrub(error_text(exc.body) if exc.body is not None else exc.message, client.api_key)
    return f"{hint} The provider at {client.base_url} answered {status}: {detail}".strip()
