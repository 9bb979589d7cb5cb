"""Folding a chat-completions stream's chunks into text deltas and one finished response.

Providers disagree on where they send the reply's text and its thinking (PROVIDERS.md,
"Reasoning"): in the content, in a refusal, in reasoning fields, in `<think>` tags inside the
content (rojos.provider.think_tags) or in Mistral's typed parts. The accumulator folds them
into one text and one thinking, and passes each tool-call delta on to the response's calls
(rojos.provider.streamed_calls), which match it to its call. It runs once per chunk, so it
stays plain: no per-chunk objects or helper layers. What the parts it folds amount to, once
the stream ended, is rojos.provider.completion's.
"""

from rojos.errors import ProviderError
from rojos.provider.completion import ResponseParts
from rojos.provider.refusals import mid_stream_error
from rojos.provider.think_tags import ThinkTags
from rojos.provider.wire_text import nul_replaced

# Delta keys the accumulator reads first; anything else a provider adds is kept verbatim,
# but for the rare `function_call` (the pre-tools shape of a call, read as one).
_KNOWN_DELTA_KEYS = frozenset(
    {"role", "content", "tool_calls", "reasoning_content", "reasoning", "refusal"}
)
# The keys of nearly every streamed delta: text and nothing else to look for.
_TEXT_KEYS = frozenset({"role", "content"})

_FOLD = 256  # text parts joined into one block


class StreamAccumulator(ResponseParts):
    """Folds chat-completion chunks into text deltas and, at the end, one response with
    its whole tool calls."""

    def __init__(self, *, think_opened: bool = False) -> None:
        """`think_opened`: the model's content begins inside its thinking, the opening tag
        in its prompt (rojos.provider.think_tags; the self-test's "closing think tag")."""
        super().__init__()  # the parts (text in blocks of _FOLD parts joined)
        self._tags: ThinkTags | None = ThinkTags(opened=think_opened)
        self._think_opened = think_opened

    def feed(self, chunk: dict) -> str:
        """Take one parsed chunk; return the text it adds (possibly "")."""
        if not isinstance(chunk, dict):
            raise ProviderError("The provider sent a malformed stream chunk.")
        error = chunk.get("error")
        if error:
            raise mid_stream_error(error, None)
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        choices = chunk.get("choices") or ()
        try:
            if len(choices) == 1:  # nearly every chunk: no generator and join for it
                return self._take_choice(choices[0])
            return "".join(self._take_choice(choice) for choice in choices)
        except (AttributeError, TypeError, KeyError):
            raise ProviderError("The provider sent a malformed stream chunk.") from None

    def _take_choice(self, choice: dict) -> str:
        text = self._take_delta(choice.get("delta") or choice.get("message") or {})
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
            if self._tags is not None:
                text += self._content_ended()
        return text

    def _content_ended(self) -> str:
        """The content is over (the response finished, or its first call began): a possible
        tag held at its end was text or thinking after all, and an unclosed thinking that
        opened in the prompt was the answer. Returns the text that adds: at a call's
        beginning, so that the answer shows before the call, as it is stored."""
        text = ""
        if self._tags.held:  # ended on a possible tag
            answer, thought = self._tags.flush()
            if thought:
                self._reason(thought, "think")
            if answer:
                self.text_parts.append(answer)
                text += answer
        if self._think_opened and self._tags.thinking:
            text += self._unthought()
        return text

    def _unthought(self) -> str:
        """A reply of a model whose thinking opens in its prompt that ended with no closing
        tag: it did not think, and what looked like thinking is its answer (unless it ran
        out of tokens while thinking). Returns that text, now the reply's."""
        self._tags = None
        if self.finish_reason == "length" or self.reasoning_shape != "think":
            return ""
        answer = "".join(self.reasoning_parts)
        self.reasoning_parts.clear()
        self.reasoning_shape = None
        if answer:
            self._text_add(answer)
        return answer

    def _reason(self, text: str, shape: str) -> None:
        self.reasoning_parts.append(nul_replaced(text))
        if self.reasoning_shape is None:
            self.reasoning_shape = shape

    def _take_delta(self, delta: dict) -> str:
        text = ""
        content = delta.get("content")
        if isinstance(content, str) and content:
            tags = self._tags
            if tags is None:  # the answer has begun: no more tags to look for
                text = content
            else:
                text, thought = tags.feed(content)
                if thought:
                    self._reason(thought, "think")
                if tags.answering:
                    self._tags = None
        elif isinstance(content, list):  # typed parts (Mistral reasoning models)
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "text":
                    text += part.get("text") or ""
                elif part.get("type") == "thinking":
                    self._reason(_thinking_text(part), "thinking")
        if text:  # inline, not _text_add: nearly every chunk comes this way
            if "\x00" in text:  # no store keeps a NUL (rojos.provider.wire_text)
                text = nul_replaced(text)
            self.text_parts.append(text)
            if len(self.text_parts) == _FOLD:
                self._text_blocks.append("".join(self.text_parts))
                self.text_parts.clear()
        if delta.keys() <= _TEXT_KEYS:  # no reasoning, calls or extra keys to look for
            return text
        refusal = delta.get("refusal")
        if refusal and isinstance(refusal, str):  # OpenAI's, in place of content: the reply
            refusal = nul_replaced(refusal)
            self._text_add(refusal)
            text += refusal
        reasoning = delta.get("reasoning_content")
        if reasoning and isinstance(reasoning, str):
            self._reason(reasoning, "reasoning_content")
        elif (reasoning := delta.get("reasoning")) and isinstance(reasoning, str):
            self._reason(reasoning, "reasoning")
        if (calls := delta.get("tool_calls")) and self._tags is not None and not self.calls:
            text += self._content_ended()
        for raw in calls or ():
            self._calls.take(raw)
        for key, value in delta.items():
            if key not in _KNOWN_DELTA_KEYS and value is not None:
                if key == "function_call":
                    text += self._function_call(value)
                else:
                    self.extra[key] = value
        return text

    def _function_call(self, function: dict) -> str:
        """A `function_call` delta: OpenAI's shape of one call from before `tool_calls`,
        still sent by old servers and the proxies in front of them, its name first and its
        arguments in fragments. It is one tool call, read as a tool call's delta with
        neither id nor index (it gets an id as it finishes); unread, such a reply ended
        empty, with no error. Returns the text its beginning adds, as a tool call's does."""
        text = self._content_ended() if self._tags is not None and not self.calls else ""
        self._calls.take({"function": function})
        return text

    def _text_add(self, text: str) -> None:
        self.text_parts.append(text)
        if len(self.text_parts) == _FOLD:
            self._text_blocks.append("".join(self.text_parts))
            self.text_parts.clear()


def _thinking_text(part: dict) -> str:
    thinking = part.get("thinking")
    if isinstance(thinking, str):
        return thinking
    if isinstance(thinking, list):
        return "".join(p.get("text", "") for p in thinking if isinstance(p, dict))
    return ""
