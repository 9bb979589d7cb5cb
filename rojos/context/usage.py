"""What each model response used: its tokens, as providers report them, and what they cost.

Providers name the same counts differently: OpenAI's `prompt_tokens` with the cached part in
`prompt_tokens_details.cached_tokens` and reasoning in `completion_tokens_details`; Anthropic's
`input_tokens` and `cache_read_input_tokens`; DeepSeek's `prompt_cache_hit_tokens`. They
are read here into one shape; the raw usage stays on the message as the provider sent it.
"""

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from rojos.models import Rojo, UsageRecord

_MILLION = Decimal(1_000_000)


@dataclass(frozen=True, slots=True)
class UsageCounts:
    """One response's tokens; `reported` is False for the app's own estimate."""

    prompt: int = 0
    completion: int = 0
    cached: int = 0
    reasoning: int = 0
    reported: bool = True

    @property
    def total(self) -> int:
        return self.prompt + self.completion


# The most a usage row's column holds (PostgreSQL's integer): a count past it is no count.
_MOST = 2**31 - 1


def _count(*values: Any) -> int | None:
    for value in values:
        if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= _MOST:
            return int(value)
    return None


def _details(usage: dict, *keys: str) -> dict:
    for key in keys:
        if isinstance(usage.get(key), dict):
            return usage[key]
    return {}


def usage_counts(usage: Any) -> UsageCounts | None:
    """The counts of a provider's usage object, whatever its names; None without a prompt count."""
    if not isinstance(usage, dict):
        return None
    prompt = _count(usage.get("prompt_tokens"), usage.get("input_tokens"))
    if prompt is None:
        return None
    prompt_details = _details(usage, "prompt_tokens_details", "input_tokens_details")
    completion_details = _details(usage, "completion_tokens_details", "output_tokens_details")
    cached = _count(
        prompt_details.get("cached_tokens"),
        usage.get("cache_read_input_tokens"),
        usage.get("prompt_cache_hit_tokens"),
        usage.get("cached_tokens"),
    )
    if "input_tokens" in usage and "prompt_tokens" not in usage and cached:
        prompt += cached  # Anthropic counts cache reads beside its input tokens, not in them
        if prompt > _MOST:  # together past what a row holds: no count either
            return None
    return UsageCounts(
        prompt=prompt,
        completion=_count(usage.get("completion_tokens"), usage.get("output_tokens")) or 0,
        cached=min(cached or 0, prompt),
        reasoning=_count(completion_details.get("reasoning_tokens"), usage.get("reasoning_tokens"))
        or 0,
    )


def usage_cost(rojo: Rojo, counts: UsageCounts) -> Decimal | None:
    """The cost of `counts` at the rojo's prices per million tokens; None when it has none.

    Cached input is billed at the cached price where the rojo has one, else as input.
    """
    if rojo.price_input is None and rojo.price_output is None:
        return None
    price_input = rojo.price_input or Decimal(0)
    price_cached = rojo.price_cached_input if rojo.price_cached_input is not None else price_input
    fresh = counts.prompt - counts.cached
    cost = (
        fresh * price_input
        + counts.cached * price_cached
        + counts.completion * (rojo.price_output or Decimal(0))
    ) / _MILLION
    return min(cost.quantize(Decimal("0.00000001")), _cost_most())


def _cost_most() -> Decimal:
    """The most a usage row's cost holds (a million dollars): counts a row holds at prices
    an admin may type in can cost more, and the row's insert would fail on PostgreSQL."""
    field = UsageRecord._meta.get_field("cost")
    return Decimal(10) ** (field.max_digits - field.decimal_places) - Decimal(10) ** (
        -field.decimal_places
    )
