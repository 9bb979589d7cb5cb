"""The fake provider answering like one real provider: its streams, its refusals, its listings.

A `ProviderProfile` gathers the shapes PROVIDERS.md reports for one provider (how tool calls
stream, where usage and reasoning come, which options it refuses and in which words, whether
the model takes images, where the server lists its window); `use_profile` makes the fake
provider a model that reads each request and answers in that provider's shapes:
- a message with an image part: an answer, or the provider's refusal of images;
- tools offered and words in double quotes in the last user message: a call to the first
  tool per word (all of them where the provider makes parallel calls, else the first);
- anything else: a short text answer, after the reasoning in the provider's shape.
An option the provider refuses is refused first, wherever it appears.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from tests.support.fake_provider import (
    FakeProvider,
    HttpError,
    Stream,
    Window,
    chunk,
    http_error,
    stream,
    stream_options_refusal,
    tool_call_chunks,
    usage_chunk,
)

Reasoning = Literal[
    "reasoning_content", "reasoning", "thinking parts", "think tags", "closing think tag"
]
ANSWER = "42"
THOUGHT = "17 and 25 make 42."


def _openai_unsupported(option: str) -> HttpError:
    """OpenAI's words for a parameter its reasoning models do not take."""
    message = f"Unsupported parameter: '{option}' is not supported with this model."
    error = {"message": message, "type": "invalid_request_error", "param": option}
    return http_error(400, {"error": {**error, "code": "unsupported_parameter"}})


def _no_images(status: int, body: Any) -> Callable[[], HttpError]:
    return lambda: http_error(status, body)


@dataclass(frozen=True, kw_only=True)
class ProviderProfile:
    """How one provider streams, refuses and lists (see PROVIDERS.md)."""

    name: str
    calls: dict[str, Any] = field(default_factory=dict)  # tool_call_chunks' quirks
    first_index: int = 0  # gateways serving Claude number calls from 1 after text
    parallel: Literal["yes", "one", "asked"] = "yes"  # "asked": only with parallel_tool_calls
    reasoning: Reasoning | None = None
    # Where usage comes: the usage-only chunk the fake server adds when asked, the last
    # chunk when asked, or the last chunk always (asked or not).
    usage: Literal["usage-only", "in last chunk", "always"] = "usage-only"
    images: Callable[[], HttpError] | None = None  # the refusal; None: images are taken
    refuses: dict[str, Callable[[], HttpError]] = field(default_factory=dict)
    window: Window | None = None


PROFILES: dict[str, ProviderProfile] = {
    profile.name: profile
    for profile in (
        # A reasoning model (o3/o4-mini): it refuses parallel_tool_calls and shows no thinking.
        ProviderProfile(
            name="openai",
            refuses={"parallel_tool_calls": lambda: _openai_unsupported("parallel_tool_calls")},
        ),
        ProviderProfile(
            name="anthropic",
            calls={"text_before": "I'll note them."},
            first_index=1,
        ),
        ProviderProfile(
            name="gemini",
            calls={
                "index": "missing",
                "arguments": "whole",
                "finish": "stop",
                "finish_in_last": True,
                "extra": {"extra_content": {"google": {"thought_signature": "c2ln"}}},
            },
            usage="in last chunk",
        ),
        ProviderProfile(
            name="mistral",
            calls={"arguments": "whole", "finish_in_last": True},
            reasoning="thinking parts",
            usage="always",
            images=_no_images(
                400,
                {
                    "object": "error",
                    "message": "Image input is not supported for this model.",
                    "type": "invalid_request_message_error",
                    "code": "3051",
                },
            ),
            refuses={"stream_options": lambda: stream_options_refusal("fastapi")},
        ),
        ProviderProfile(
            name="ollama",
            calls={"index": "zero", "arguments": "whole", "ids": "every"},
            reasoning="reasoning",
            images=_no_images(
                400,
                {"error": {"message": "model does not support images", "type": "api_error"}},
            ),
            window=Window(tokens=8192, shape="ollama", listed_by="ollama"),
        ),
        ProviderProfile(
            name="lmstudio",
            calls={"empty_name_on_continuation": True},
            reasoning="reasoning_content",
            window=Window(tokens=16384, listed_by="lmstudio"),
        ),
        ProviderProfile(
            name="vllm",
            reasoning="reasoning_content",
            images=_no_images(
                400,
                {
                    "object": "error",
                    "message": "fake-model is not a multimodal model",
                    "type": "BadRequestError",
                    "code": 400,
                },
            ),
            window=Window(tokens=32768, shape="vllm", listed_by="vllm"),
        ),
        # llama-server makes one call per response unless asked (`parallel_tool_calls: true`).
        ProviderProfile(
            name="llamacpp",
            calls={"ids": "every"},
            parallel="asked",
            reasoning="think tags",
            images=_no_images(
                400,
                {
                    "error": {
                        "code": 400,
                        "message": "image input is not supported - hint: if this is "
                        "unexpected, you may need to provide the mmproj",
                        "type": "invalid_request_error",
                    }
                },
            ),
            window=Window(tokens=4096, shape="llamacpp", listed_by="llamacpp"),
        ),
    )
}


# llama.cpp serving a model that makes one call per response, asked for more or not.
PROFILES["llamacpp-single"] = dataclasses.replace(
    PROFILES["llamacpp"], name="llamacpp-single", parallel="one"
)


# vLLM serving a model whose template opens its thinking in the prompt (Qwen3's
# *-Thinking-2507) without a reasoning parser: the content is the thinking, then `</think>`.
PROFILES["vllm-think-in-prompt"] = dataclasses.replace(
    PROFILES["vllm"], name="vllm-think-in-prompt", reasoning="closing think tag"
)


def use_profile(provider: FakeProvider, name: str) -> ProviderProfile:
    """Make the fake provider answer every unscripted request like `name`'s provider."""
    profile = PROFILES[name]
    provider.window = profile.window
    provider.responder = lambda body: answer(profile, body)
    return profile


def answer(profile: ProviderProfile, body: dict[str, Any]) -> Stream | HttpError:
    """The reply `profile`'s provider gives to a request `body`."""
    for option, refusal in profile.refuses.items():
        if option in body:
            return refusal()
    messages = body.get("messages") or []
    if any(_has_image(m) for m in messages):
        return profile.images() if profile.images else _text(profile, body, "Red.", thinking=False)
    words = re.findall(r'"(\w+)"', _last_user_text(messages))
    tools = body.get("tools") or []
    if tools and words:
        return _calls(profile, body, tools[0]["function"], words)
    return _text(profile, body, ANSWER, thinking=True)


def _has_image(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") == "image_url" for p in content
    )


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return message["content"]
    return ""


def _calls(profile: ProviderProfile, body: dict, function: dict, words: list[str]) -> Stream:
    """A call to `function` per word, or the first alone, in the provider's call shape."""
    asked = body.get("parallel_tool_calls")
    several = {"yes": asked is not False, "one": False, "asked": asked is True}[profile.parallel]
    argument = (function.get("parameters") or {}).get("required", ["value"])[0]
    calls = [(function["name"], {argument: word}) for word in words[: None if several else 1]]
    chunks = tool_call_chunks(calls, **profile.calls)
    for item in chunks:
        for call in item["choices"][0]["delta"].get("tool_calls", ()):
            if "index" in call:
                call["index"] += profile.first_index
    return _with_usage(profile, body, chunks)


def _text(profile: ProviderProfile, body: dict, text: str, *, thinking: bool) -> Stream:
    """A text answer, after the provider's reasoning shape when `thinking`."""
    shape = profile.reasoning if thinking else None
    if shape == "think tags":
        text = f"<think>{THOUGHT}</think>{text}"
    if shape == "closing think tag":  # the opening tag is in the model's prompt
        text = f"{THOUGHT}</think>\n\n{text}"
    if shape == "thinking parts":
        thought = {"type": "thinking", "thinking": [{"type": "text", "text": THOUGHT}]}
        chunks = [
            chunk({"role": "assistant", "content": [thought]}),
            chunk({"content": [{"type": "text", "text": text}]}, "stop"),
        ]
        return _with_usage(profile, body, chunks)
    head = {
        "role": "assistant",
        **({shape: THOUGHT} if shape in ("reasoning", "reasoning_content") else {}),
    }
    pieces = [text[i : i + 4] for i in range(0, len(text), 4)]
    chunks = [chunk(head)] + [chunk({"content": piece}) for piece in pieces] + [chunk({}, "stop")]
    return _with_usage(profile, body, chunks)


def _with_usage(profile: ProviderProfile, body: dict, chunks: list[dict]) -> Stream:
    """Usage where the provider puts it: the fake server adds a usage-only chunk when asked;
    a provider that reports it in its last chunk gets it there (then the server adds none:
    a chunk with `usage`, null or not, is one)."""
    asked = (body.get("stream_options") or {}).get("include_usage") is True
    if profile.usage == "always" or (profile.usage == "in last chunk" and asked):
        chunks[-1]["usage"] = usage_chunk(12, 3)["usage"]
    elif profile.usage == "in last chunk":
        chunks[-1]["usage"] = None
    return stream(chunks)
