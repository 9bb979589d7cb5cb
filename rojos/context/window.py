"""How big a request is, and how much of the rojo's context window it may take.

No tokenizer: one that downloads its vocabulary needs the network at run time, and each
model has its own. A request's size is its characters divided by a characters-per-token
ratio, calibrated from the prompt tokens the provider reported for earlier requests of the
same rojo (measured the same way, so the ratio absorbs each template's overhead). Until a
provider has reported, the ratio is a cautious 3 (English prose is nearer 4, code and JSON
nearer 3).
"""

import math

import orjson

DEFAULT_CHARS_PER_TOKEN = 3.0
# The range a calibrated ratio is kept in: a wild report must not make the estimate absurd.
_RATIO_RANGE = (1.0, 8.0)
# What the chat template adds around each message (role, markers), in characters.
MESSAGE_OVERHEAD_CHARS = 16
CALL_OVERHEAD_CHARS = 24
# What an image part is counted as: about 1,000 tokens, what a screenshot costs with the
# providers that say (OpenAI's tiles, Gemini's 258 per tile, Claude's width x height / 750).
IMAGE_PART_CHARS = 3000


def item_chars(item: dict) -> int:
    """The characters of one request message that count towards the request's size."""
    content = item.get("content")
    size = MESSAGE_OVERHEAD_CHARS + (len(content) if isinstance(content, str) else 0)
    for part in content if isinstance(content, list) else ():  # text and images
        size += IMAGE_PART_CHARS if part.get("type") == "image_url" else len(part.get("text") or "")
    for call in item.get("tool_calls") or ():
        function = call["function"]
        size += CALL_OVERHEAD_CHARS + len(function["name"]) + len(function["arguments"])
    reasoning = item.get("reasoning_content") or item.get("reasoning")  # sent back with calls
    return size + len(reasoning) if isinstance(reasoning, str) else size


def tools_chars(tools: list[dict]) -> int:
    """The characters the tool definitions add to every request."""
    return len(orjson.dumps(tools)) if tools else 0


def request_chars(request: dict) -> int:
    """The characters of a whole request: its messages and its tools."""
    return sum(item_chars(item) for item in request["messages"]) + tools_chars(
        request.get("tools") or []
    )


def tokens_of(chars: int, chars_per_token: float) -> int:
    """The estimated tokens of `chars` characters."""
    return math.ceil(chars / chars_per_token)


def calibrated(previous: float | None, chars: int, prompt_tokens: int) -> float | None:
    """The ratio after a provider counted `prompt_tokens` for a request of `chars` characters.

    The latest request's own: the next request is much like it (the same turns and a little
    more), while an average would carry the first, tool-definition-heavy request of a
    conversation for long. Kept within a sane range, so one odd report cannot make it absurd.
    """
    if prompt_tokens <= 0 or chars <= 0:
        return previous
    low, high = _RATIO_RANGE
    return min(max(chars / prompt_tokens, low), high)


DEFAULT_WINDOW = 32_768
_DEFAULT_RESERVE = 4_096


def window_of(rojo) -> int:
    """The window a rojo's requests must fit, in tokens.

    The one declared in the admin, else the one the provider lists, else 32,768; capped by
    what the provider stated when it refused a prompt as too long (a declaration can be
    wrong; the provider's refusal is not).
    """
    window = rojo.context_window or rojo.listed_window or DEFAULT_WINDOW
    return min(window, rojo.refused_window) if rojo.refused_window else window


def output_reserve(rojo, window: int) -> int:
    """Tokens kept free for the reply: the rojo's setting, else a quarter of the window up
    to 4,096."""
    if rojo.max_output_tokens:
        return min(rojo.max_output_tokens, window // 2)
    return min(_DEFAULT_RESERVE, window // 4)


def prompt_budget(rojo) -> int:
    """The tokens a request may hold: the window less the reply's reserve and a margin of
    5 % for the estimate's error."""
    window = window_of(rojo)
    return window - output_reserve(rojo, window) - window // 20
