"""One model response: its parts as its stream brings them, and the Completion they make.

The parts (text in blocks, thinking, calls, usage, finish reason) are held here and read
once the stream ended, whole (`result`, checked) or as far as they came (`so_far`); how each
chunk adds to them is the accumulator's (rojos.provider.accumulator), which extends this.
"""

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from rojos.errors import ProviderError
from rojos.provider.streamed_calls import StreamedCalls
from rojos.provider.wire_text import nul_free

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Completion:
    """One finished model response: its text and the tool calls to run, in stored form."""

    text: str
    reasoning: str
    tool_calls: list[dict]
    extra: dict
    usage: dict | None
    finish_reason: str | None
    # Where the reasoning came: "reasoning_content", "reasoning" (delta fields), "think"
    # (tags in the content) or "thinking" (Mistral's typed parts); None without reasoning.
    reasoning_shape: str | None = None


class ResponseParts:
    """What a response's stream brought so far, and what it amounts to."""

    def __init__(self) -> None:
        # The text so far: parts as they came, and blocks of parts joined. A reply of
        # 100,000 chunks otherwise holds 100,000 string objects (6 MB) until it ends.
        self.text_parts: list[str] = []
        self._text_blocks: list[str] = []
        self.reasoning_parts: list[str] = []
        self.reasoning_shape: str | None = None
        self._calls = StreamedCalls()
        self.calls = self._calls.calls  # the calls so far, as they form (the list, not a copy)
        self.extra: dict = {}
        self.usage: dict | None = None
        self.finish_reason: str | None = None
        self.late_error: ProviderError | None = None  # one after the finish (whole_if_broken)

    @contextlib.asynccontextmanager
    async def whole_if_broken(self) -> AsyncIterator[None]:
        """Around the stream's reading: a failure after the response's finish reason (before
        its usage chunk or [DONE]: a proxy that resets the connection, a server that hangs,
        or one that sends an error object or a line that is no chunk) ends the stream, not
        the turn. A finished response is whole: its text stands and its calls run (its
        usage then estimated); the failure is logged, and kept as `late_error`. Before its
        finish reason, or after a finish reason "error", it is the failure it was."""
        try:
            yield
        except ProviderError as exc:
            if not self.finished:
                raise
            self.late_error = exc
            logger.warning("the provider's stream failed after its response finished: %s", exc)

    @property
    def finished(self) -> bool:
        """The response came to its finish reason, one that is no "error": it is whole,
        whatever fails after it (whole_if_broken; the self-test reads it so too)."""
        return self.finish_reason is not None and self.finish_reason != "error"

    def take_text(self) -> str:
        """The text since the last take, joined, and given up: a draft (drafts.Draft)
        stores it after what it stored before, so a long reply is not held here as well
        as by the turn's kept events. `text` and `result()` then hold what came since."""
        text = self.text
        self._text_blocks.clear()
        return text

    @property
    def text(self) -> str:
        """The text so far (since the last `take_text`), joined. The joined text then stands
        for the blocks, not a second copy beside them."""
        if self.text_parts:
            self._text_blocks.append("".join(self.text_parts))
            self.text_parts.clear()
        if len(self._text_blocks) > 1:
            self._text_blocks[:] = ["".join(self._text_blocks)]
        return self._text_blocks[0] if self._text_blocks else ""

    @property
    def reasoning(self) -> str:
        """The thinking so far, joined; "" when it is only white space: Qwen3 with its
        thinking switched off still opens with an empty block (`<think>\n\n</think>`),
        which is no thinking to show, store or send back."""
        text = "".join(self.reasoning_parts)
        return text if not text.isspace() else ""

    def holds_nothing(self) -> bool:
        """No text, thinking, call, usage or finish came yet (a role-only chunk at most)."""
        return not (
            self.text_parts
            or self._text_blocks
            or self.reasoning_parts
            or self.calls
            or self.usage
            or self.finish_reason
        )

    def result(self, taken: frozenset[str] = frozenset()) -> Completion:
        """The finished response; raises ProviderError when the stream did not finish, or
        left a call without a name. `taken`: the ids of the conversation's earlier calls,
        which no call here keeps (StreamedCalls.finished)."""
        if self.finish_reason is None:
            raise ProviderError(
                "The provider's response ended before it finished (no finish reason); "
                "nothing from the unfinished part was run."
            )
        if self.finish_reason == "error":  # an error object with it was raised as it came
            raise ProviderError(
                'The provider ended its response with an error (finish reason "error") and '
                "gave no reason; nothing from it was run."
            )
        tool_calls = self._calls.finished(taken)
        reasoning = self.reasoning
        return Completion(
            text=self.text,
            reasoning=reasoning,
            tool_calls=tool_calls,
            extra=nul_free(self.extra) if self.extra else self.extra,
            usage=nul_free(self.usage) if self.usage else self.usage,
            finish_reason=self.finish_reason,
            reasoning_shape=self.reasoning_shape if reasoning else None,
        )

    def so_far(self) -> Completion:
        """What came of a response that did not finish or was not stored whole (stopped,
        cut, failed), unchecked: its text, thinking and calls as far as they came, and any
        usage the provider sent; for counting what it used, never to run or store."""
        return Completion(
            text=self.text,
            reasoning=self.reasoning,
            tool_calls=self._calls.so_far(),
            extra=nul_free(self.extra) if self.extra else self.extra,
            usage=nul_free(self.usage) if self.usage else self.usage,
            finish_reason=self.finish_reason,
            reasoning_shape=self.reasoning_shape,
        )
