"""`<think>…</think>` at the start of a reply's content: the reasoning, split from the answer.

Some local chat templates (Qwen3, DeepSeek-R1 distills served without a reasoning parser)
stream the model's thinking inside `content`, wrapped in these tags (PROVIDERS.md,
"Reasoning"). A tag may be split across chunks ("<thi", "nk>"), so the splitter holds back
the few characters that could still become one, and nothing else: the answer streams as it
comes. Only a tag that opens the content counts; a reply that mentions `<think>` later (a
page about these tags) is left as it was written.

Other templates (Qwen3's *-Thinking-2507, DeepSeek-R1-0528) put the opening tag in the prompt,
so the content is the thinking, `</think>`, then the answer. Nothing in the stream tells that
apart from an answer until the tag comes, so the splitter starts inside the thinking only
when told (`opened`: the provider self-test found that shape for the model).
"""

_OPEN = "<think>"
_CLOSE = "</think>"

# States: nothing but white space yet; inside the thinking; after it, white space dropped
# until the answer begins; the answer (every later chunk passes through untouched).
_START, _THINK, _AFTER, _ANSWER = range(4)


class ThinkTags:
    """Splits each chunk of content into (answer text, reasoning text)."""

    __slots__ = ("held", "state")

    def __init__(self, *, opened: bool = False) -> None:
        self.state = _THINK if opened else _START
        self.held = ""  # text that may still turn out to be (part of) a tag

    def feed(self, text: str) -> tuple[str, str]:
        """The answer and the reasoning in this chunk, given what came before it."""
        if self.state == _ANSWER:
            return text, ""
        text, self.held = self.held + text, ""
        if self.state == _START:
            begun = text.lstrip()
            if len(begun) < len(_OPEN) and _OPEN.startswith(begun):
                self.held = text  # white space, or the start of a tag: wait for more
                return "", ""
            if not begun.startswith(_OPEN):
                self.state = _ANSWER
                return text, ""
            self.state, text = _THINK, begun[len(_OPEN) :]
        reasoning = ""
        if self.state == _THINK:
            end = text.find(_CLOSE)
            if end < 0:
                keep = _partial_tag(text)
                self.held = text[len(text) - keep :] if keep else ""
                return "", text[: len(text) - keep]
            reasoning, text, self.state = text[:end], text[end + len(_CLOSE) :], _AFTER
        answer = text.lstrip()
        if answer:
            self.state = _ANSWER
        return answer, reasoning

    @property
    def thinking(self) -> bool:
        """Inside the thinking still: its closing tag has not come."""
        return self.state == _THINK

    @property
    def answering(self) -> bool:
        """The answer has begun: every later chunk is answer text."""
        return self.state == _ANSWER

    def flush(self) -> tuple[str, str]:
        """What is held at the end of the reply: the answer's, or the reasoning's."""
        held, self.held = self.held, ""
        if self.state == _THINK:
            return "", held
        return (held, "") if self.state == _START and held.strip() else ("", "")


def _partial_tag(text: str) -> int:
    """How many characters at the end of `text` could begin the closing tag."""
    for size in range(min(len(_CLOSE) - 1, len(text)), 0, -1):
        if _CLOSE.startswith(text[-size:]):
            return size
    return 0
