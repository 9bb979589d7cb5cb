"""A turn's kept events read back from any seq exactly as they were published, whatever the
lengths of its chunks (one byte each while they are short, more once one is long)."""

import random
from types import SimpleNamespace

import pytest

from rojos.turns import events as turn_events
from rojos.turns.events import CATCH_UP_BYTES, JOIN_AFTER, TurnEvents


def _published(lengths: list[int]) -> tuple[TurnEvents, list[tuple[str, object]]]:
    """START, a run of CHAT chunks of these lengths (UTF-8 bytes: some multi-byte), DONE."""
    events, model = TurnEvents(), []
    events.append("START", {"conversation": 1})
    model.append(("START", {"conversation": 1}))
    for number, length in enumerate(lengths):
        text = ("é" * (length // 2) + "x" * (length % 2)) if number % 3 else "w" * length
        events.append("CHAT", text)
        model.append(("CHAT", text))
    events.append("DONE", {})
    model.append(("DONE", {}))
    return events, model


def _text_after(model, after: int) -> str:
    return "".join(data for kind, data in model[after:] if kind == "CHAT")


@pytest.mark.parametrize(
    "lengths",
    [
        [5] * 1000,  # short chunks: a byte each
        [3, 7, 300, 2] * 200,  # one past 255 bytes: two bytes each from then on
        [4] * 70 + [70_000] + [6] * 130,  # one past 65,535 bytes: four bytes each
        [0, 1, 0, 2] * 100,  # empty chunks
    ],
)
def test_every_seq_reads_back_as_published(lengths):
    events, model = _published(lengths)
    assert events.seq == len(model)
    for seq in range(1, len(model) + 1):
        kind, data = model[seq - 1]
        event = events.at(seq)
        assert (event.seq, event.type) == (seq, kind)
        assert event.data == ({"text": data} if kind == "CHAT" else data)


@pytest.mark.parametrize("seed", range(6))
def test_a_follower_from_any_seq_gets_exactly_the_rest_in_bounded_events(seed):
    rng = random.Random(seed)
    lengths = [
        rng.choice([1, 2, 8, 40, 255, 256, 900, 20_000]) for _ in range(rng.randint(50, 3000))
    ]
    events, model = _published(lengths)
    for after in sorted(
        {0, 1, 2, len(model) - 1, len(model)} | {rng.randrange(len(model)) for _ in range(40)}
    ):
        seen, text, kinds = after, [], []
        while (event := events.after(seen)) is not None:
            assert event.seq > seen
            if event.type == "CHAT":
                text.append(event.data["text"])
                behind = len(model) - 1 - seen  # chunks left at most, before DONE
                if behind > JOIN_AFTER:
                    # a catch-up event: within CATCH_UP_BYTES but for its last chunk
                    last = len(model[event.seq - 1][1].encode())
                    assert len(event.data["text"].encode()) < CATCH_UP_BYTES + last or (
                        len(model) - 1 - event.seq <= JOIN_AFTER
                    )
            kinds.append(event.type)
            seen = event.seq
        assert seen == len(model)
        assert "".join(text) == _text_after(model, after)
        assert kinds[-1:] == (["DONE"] if after < len(model) else [])


def test_the_kept_bytes_are_the_text_and_about_a_byte_a_chunk():
    events, _model = _published([6] * 100_000)
    assert events.entries() == 3
    assert events.kept_bytes() == 600_000 + 100_000 + 4 * (100_000 // 64 + 1)


def test_the_event_that_begins_a_thinking_says_how_long_it_has_lasted(monkeypatch):
    """Whoever reads a REASONING run from its first chunk (live, or joining mid-thought: a
    reload, another tab) is told how long that thinking has lasted as it reads, by this
    process's clock, so the page counts from the thinking's start; later chunks, joined
    catch-up events from elsewhere in the run and the reply's text say nothing of it."""
    clock = SimpleNamespace(now=100.0)
    monkeypatch.setattr(turn_events, "time", SimpleNamespace(monotonic=lambda: clock.now))
    events = TurnEvents()
    events.append("START", {"conversation": 1})
    events.append("REASONING", "First ")
    clock.now = 100.4
    assert events.after(1).data == {"text": "First ", "elapsed": 0.4}  # live, as it came
    for n in range(JOIN_AFTER + 8):
        events.append("REASONING", f"step {n}. ")
    clock.now = 107.2

    joined = events.after(1)  # a page joining now: the run so far, in one event
    assert joined.data["elapsed"] == 7.2 and joined.data["text"].startswith("First step 0.")
    assert events.at(2).data == {"text": "First ", "elapsed": 7.2}
    assert events.at(3).data == {"text": "step 0. "}
    assert "elapsed" not in events.after(2).data  # a follower that had the start
    events.append("CHAT", "The answer.")
    assert events.after(events.seq - 1).data == {"text": "The answer."}
    clock.now = 150.0  # a page that loads once the thinking is over: what it lasted
    assert events.at(2).data == {"text": "First ", "elapsed": 7.2}

    events.append("TOOL_CALL", {"id": "a", "name": "list_files", "args": {}})
    clock.now = 110.0
    events.append("REASONING", "Then ")  # the next response's thinking counts anew
    clock.now = 111.0
    assert events.after(events.seq - 1).data == {"text": "Then ", "elapsed": 1.0}


def test_a_calls_progress_is_kept_as_its_latest_and_followed_as_it_came():
    """Two calls' reports among text chunks and other events: a follower that keeps up gets
    each event as published; one that starts from any seq later gets every event kept
    from there in order, each call's progress as its latest alone, and no dropped one."""
    events, published, live = TurnEvents(), [], []

    def publish(kind: str, data):
        events.append(kind, data)
        published.append((events.seq, kind, data))
        seen = live[-1].seq if live else 0
        while (event := events.after(seen)) is not None:
            live.append(event)
            seen = event.seq

    publish("START", {"conversation": 1})
    publish("CHAT", "Fetching ")
    publish("CHAT", "both.")
    publish("TOOL_CALL", {"id": "a"})
    publish("TOOL_CALL", {"id": "b"})
    for step in range(1, 50):
        publish("TOOL_PROGRESS", {"id": "a", "progress": step})
        if step % 3 == 0:
            publish("TOOL_PROGRESS", {"id": "b", "progress": step})
        if step % 7 == 0:
            publish("CHAT", f"({step})")
    publish("TOOL_RESULT", {"id": "b"})
    publish("DONE", {})

    def wire(kind, data):
        return {"text": data} if kind in ("CHAT", "REASONING") else data

    assert [(e.seq, e.type, e.data) for e in live] == [(s, k, wire(k, d)) for s, k, d in published]
    latest = {("a", 49), ("b", 48)}
    kept = [
        (s, k, wire(k, d))
        for s, k, d in published
        if k != "TOOL_PROGRESS" or (d["id"], d["progress"]) in latest
    ]
    assert events.entries() < len(published) - 60
    for after in range(events.seq + 1):
        rest, seen = [], after
        while (event := events.after(seen)) is not None:
            rest.append((event.seq, event.type, event.data))
            seen = event.seq
        assert rest == [entry for entry in kept if entry[0] > after]
        if after and after not in {s for s, _k, _d in kept}:
            with pytest.raises(IndexError):
                events.at(after)
