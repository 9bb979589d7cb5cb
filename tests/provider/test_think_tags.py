"""`<think>…</think>` in the content: split from the answer as it streams, tags cut anywhere."""

import pytest

from rojos.provider.accumulator import StreamAccumulator
from rojos.provider.think_tags import ThinkTags

REPLY = "<think>The user wants a list.\nI call list_files.</think>\n\nHere is the list."


def split(pieces: list[str]) -> tuple[list[str], list[str]]:
    """What each piece gave of answer and of reasoning, then what the end flushed."""
    tags = ThinkTags()
    answers, thoughts = [], []
    for piece in pieces:
        answer, thought = tags.feed(piece)
        answers.append(answer)
        thoughts.append(thought)
    answer, thought = tags.flush()
    return [*answers, answer], [*thoughts, thought]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 8, 13, len(REPLY)])
def test_the_reply_cut_anywhere_splits_the_same(size):
    """Fed in pieces of any size, tags split across them: the same answer and reasoning."""
    pieces = [REPLY[i : i + size] for i in range(0, len(REPLY), size)]
    answers, thoughts = split(pieces)
    assert "".join(thoughts) == "The user wants a list.\nI call list_files."
    assert "".join(answers) == "Here is the list."


def test_the_thinking_streams_as_it_comes_holding_back_only_a_possible_tag():
    """Each piece of thinking is given at once; only what may begin `</think>` waits."""
    tags = ThinkTags()
    assert tags.feed("<think>") == ("", "")
    assert tags.feed("First I") == ("", "First I")
    assert tags.feed(" read.</th") == ("", " read.")
    assert tags.feed("ink>Done") == ("Done", "")
    assert tags.feed(" <think>x</think>") == (" <think>x</think>", "")


def test_a_reply_that_only_mentions_the_tag_later_is_left_as_written():
    """Only a tag that opens the content is thinking: a page about tags keeps them."""
    answers, thoughts = split(["Use ", "<think> tags like this: <think>a</think>"])
    assert "".join(answers) == "Use <think> tags like this: <think>a</think>"
    assert not "".join(thoughts)


def test_a_reply_that_begins_like_a_tag_but_is_not_one_keeps_its_text():
    answers, thoughts = split(["  <thi", "s is fine"])
    assert "".join(answers) == "  <this is fine" and not "".join(thoughts)
    answers, thoughts = split(["<th"])  # the reply ends there: it was text
    assert "".join(answers) == "<th" and not "".join(thoughts)


def test_thinking_cut_off_at_the_end_is_still_thinking():
    answers, thoughts = split(["<think>Half a thou", "ght </thi"])
    assert "".join(thoughts) == "Half a thought </thi" and not "".join(answers)


def chunk(content: str, finish: str | None = None) -> dict:
    return {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]}


def test_the_accumulator_streams_the_answer_and_keeps_the_thinking_as_reasoning():
    """Text deltas carry only the answer; the reasoning (shape "think") is the message's."""
    accumulator = StreamAccumulator()
    pieces = ["<thi", "nk>Look", " first.</th", "ink>\n", "\nThe ", "answer.<th"]
    texts = [accumulator.feed(chunk(piece)) for piece in pieces]
    texts.append(accumulator.feed(chunk("", "stop")))
    assert "".join(texts) == "The answer.<th"
    completion = accumulator.result()
    assert completion.text == "The answer.<th"
    assert (completion.reasoning, completion.reasoning_shape) == ("Look first.", "think")


def test_a_reply_of_only_a_tag_start_ends_with_its_text():
    """A reply that is just "<th" (held as a possible tag) gives its text as it finishes."""
    accumulator = StreamAccumulator()
    assert accumulator.feed(chunk("<th")) == ""
    assert accumulator.feed(chunk("", "stop")) == "<th"
    assert accumulator.result().text == "<th"


OPENED = "The user greets me.\nI greet back.</think>\n\nHello!"


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, len(OPENED)])
def test_thinking_opened_in_the_prompt_splits_at_its_closing_tag_cut_anywhere(size):
    """The self-test found the model's thinking opens in its prompt (`think_opened`)."""
    accumulator = StreamAccumulator(think_opened=True)
    for i in range(0, len(OPENED), size):
        accumulator.feed(chunk(OPENED[i : i + size]))
    accumulator.feed(chunk("", "stop"))
    completion = accumulator.result()
    assert (completion.text, completion.reasoning) == (
        "Hello!", "The user greets me.\nI greet back."
    )  # fmt: skip


def test_a_reply_of_such_a_model_without_the_closing_tag_did_not_think():
    """No `</think>` by the end: what streamed as thinking was the answer after all, and the
    end gives it as text; cut off by the token limit, it stays thinking."""
    accumulator = StreamAccumulator(think_opened=True)
    assert accumulator.feed(chunk("Just ")) == ""
    assert accumulator.feed(chunk("this.", "stop")) == "Just this."
    assert (accumulator.result().text, accumulator.result().reasoning) == ("Just this.", "")

    cut = StreamAccumulator(think_opened=True)
    cut.feed(chunk("Still thinking", "length"))
    assert (cut.result().text, cut.result().reasoning) == ("", "Still thinking")
