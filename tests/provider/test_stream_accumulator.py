"""The accumulator's text: right across its folds, and held once once joined."""

from rojos.provider.accumulator import StreamAccumulator


def text_chunk(text: str) -> dict:
    return {"choices": [{"index": 0, "delta": {"content": text}}]}


def test_the_text_joined_for_a_draft_is_the_accumulators_only_copy():
    """A 100,000-chunk reply read as drafts are saved (each joins the text so far) and at its
    end: every join is the whole text, and the joined string is what the accumulator keeps,
    so a draft or the stored reply holding it adds no second copy."""
    accumulator = StreamAccumulator()
    words = [f"word{n % 1000} " for n in range(100_000)]
    for n, word in enumerate(words, 1):
        assert accumulator.feed(text_chunk(word)) == word
        if n % 30_001 == 0:  # a draft, mid-block
            assert accumulator.text == "".join(words[:n])
    draft = accumulator.text
    assert draft == "".join(words)
    assert accumulator.text is draft
    accumulator.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    assert accumulator.result().text is draft
