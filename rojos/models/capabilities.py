"""What a rojo's provider and model were found to do, as the loop reads it.

The provider self-test (`rojos.selftest`) stores a profile per model name in
`Rojo.capability_profiles`; everything that acts on it reads it through `capabilities_for`,
below the provider's request building, so that the request, the attachments and the window
all read the same answer. A capability never tested, or whose test could not tell, is None:
the app then behaves as it did before any test.
"""

from dataclasses import dataclass
from typing import Literal

Status = Literal["works", "does_not", "unknown"]

# The capabilities the self-test probes, in the order its table shows them.
STREAM = "stream"
TOOL_CALL = "tool_call"
PARALLEL_CALLS = "parallel_calls"
USAGE = "usage"
REASONING = "reasoning"
IMAGES = "images"
LISTING = "listing"
OPTIONS = "options"
CAPABILITIES = (STREAM, TOOL_CALL, PARALLEL_CALLS, USAGE, REASONING, IMAGES, LISTING, OPTIONS)
# The reasoning shape of a model whose thinking opens in its prompt: its content is the
# thinking, `</think>`, then the answer (rojos.provider.think_tags).
CLOSING_THINK_TAG = "closing think tag"


@dataclass(frozen=True, kw_only=True, slots=True)
class Capabilities:
    """One model's tested capabilities; None: not tested, or the test could not tell."""

    parallel_calls: bool | None = None
    # They come only when asked for (`parallel_tool_calls: true`: llama.cpp's server).
    parallel_asked: bool = False
    # Whether the provider takes `parallel_tool_calls` (OpenAI's reasoning models refuse it).
    parallel_option: bool | None = None
    # The options a turn adds that the provider refused (None: not found out).
    refused: tuple[str, ...] | None = None
    images: bool | None = None
    stream_usage: bool | None = None
    reasoning: str | None = None  # the shape its thinking comes in, when it shows any
    window: int | None = None  # the window the provider lists for the model
    taken: str | None = None  # when the profile was taken (ISO 8601)


UNTESTED = Capabilities()


def _works(results: dict, name: str) -> bool | None:
    status = (results.get(name) or {}).get("status")
    return {"works": True, "does_not": False}.get(status)


def _detail(results: dict, name: str) -> dict:
    detail = (results.get(name) or {}).get("detail")
    return detail if isinstance(detail, dict) else {}


def capabilities_for(rojo, model: str | None = None) -> Capabilities:
    """The capabilities of `model` (default: the rojo's) as its last self-test found them."""
    profiles = rojo.capability_profiles if isinstance(rojo.capability_profiles, dict) else {}
    return capabilities_of(profiles.get(model or rojo.model))


def capabilities_of(profile) -> Capabilities:
    """The capabilities a stored profile (`Profile.as_json()`) says; UNTESTED for none."""
    if not isinstance(profile, dict) or not isinstance(profile.get("results"), dict):
        return UNTESTED
    results = profile["results"]
    refused = _detail(results, OPTIONS).get("refused")
    refused = tuple(str(o) for o in refused) if isinstance(refused, list) else None
    window = _detail(results, LISTING).get("window")
    shape = _detail(results, REASONING).get("shape")
    return Capabilities(
        parallel_calls=_works(results, PARALLEL_CALLS),
        parallel_asked=_detail(results, PARALLEL_CALLS).get("asked") is True,
        parallel_option=None if refused is None else "parallel_tool_calls" not in refused,
        refused=refused,
        images=_works(results, IMAGES),
        stream_usage=_works(results, USAGE),
        reasoning=shape if isinstance(shape, str) else None,
        window=window if isinstance(window, int) and window > 0 else None,
        taken=profile.get("taken") if isinstance(profile.get("taken"), str) else None,
    )
