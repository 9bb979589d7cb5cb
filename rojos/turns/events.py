"""A turn's numbered events as they are kept in memory: compact, and readable from any seq.

A reply of 100,000 chunks kept as 100,000 events held about 13 MiB per turn (a string object,
two list slots and a dict per chunk), for as long as the turn ran and 120 s after, and for as
long as any connection still followed it. Here consecutive CHAT chunks are kept as one run:
their UTF-8 text in one buffer and, for each chunk, its length (1 byte, mostly). Every
other event is kept as its wire data. The numbering stays that of the events as published
(seq 1, 2, …): a follower that keeps up gets each chunk as its own event, numbered as it was;
one that is far behind (a re-attach, a slow reader) gets the rest of the run in CHAT events
of about CATCH_UP_BYTES each at most, each numbered as its last chunk, so that the text
after any seq is exactly what it is sent. (The whole rest in one event had been up to the
whole reply, 0.8 MB on 100,000 chunks, sliced, decoded, encoded and buffered at once for
every follower far behind: ten slow readers held several times the reply each.)

A call's progress reports (TOOL_PROGRESS, up to four a second for as long as an MCP call
runs) are kept as its latest alone: each report drops the call's one before from the log.
A follower that keeps up still gets every report as it comes; one that comes later (a
re-attach) gets the latest, where it had all of them (7,200 for a half-hour call). A dropped
report's number is a gap: what follows it is the next event kept.

The event that holds the first chunk of a REASONING run also says how long that thinking has
lasted as the event is read (`elapsed`, seconds, by this process's clock): a follower that
comes mid-thought (a reload, another tab) counts its "Thinking… N s" from when the thinking
began, not from when it arrived, without trusting the browser's clock to match the server's.
"""

import time
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator

from rojos.agent.events import WireEvent, WireType

# The events kept as runs of text chunks: the reply's text, and the thinking before it.
RUN_KINDS: frozenset[WireType] = frozenset({"CHAT", "REASONING"})
# A follower this many chunks behind or more gets the rest of the run as one event.
JOIN_AFTER = 32
# About the most text (UTF-8 bytes, whole chunks) one such event carries.
CATCH_UP_BYTES = 64 * 1024
# The events kept as the latest alone, by this field of their data: a call's progress.
LATEST_KEPT: dict[WireType, str] = {"TOOL_PROGRESS": "id"}


class _Run:
    """Consecutive CHAT chunks: their text, and each chunk's length in it.

    A chunk's length takes one byte while every chunk is shorter than 256 bytes (nearly
    all are: a word or a few), two or four bytes once one is longer; where each 64th chunk
    begins is kept beside, so that finding a chunk sums at most 63 lengths. (Each chunk's
    end in four bytes was 400 KB for a reply of 100,000 chunks, half the reply's text.)
    """

    __slots__ = ("began", "ended", "lengths", "marks", "text")

    def __init__(self) -> None:
        self.began = time.monotonic()  # its first chunk came (a thinking's start)
        self.ended: float | None = None  # the next event came (the thinking was over)
        self.text = bytearray()
        self.lengths = array("B")
        self.marks = array("I")  # where chunks 0, 64, 128, … begin in the text

    def add(self, text: str) -> None:
        data = text.encode()
        count = len(self.lengths)
        if not count % _MARK:
            self.marks.append(len(self.text))
        self.text += data
        if len(data) >= 1 << (8 * self.lengths.itemsize):
            self.lengths = array("I" if len(data) >= 1 << 16 else "H", self.lengths)
        self.lengths.append(len(data))

    def __len__(self) -> int:
        return len(self.lengths)

    def begin(self, chunk: int) -> int:
        """Where the `chunk`-th chunk (0-based; the count: the run's end) begins."""
        if chunk == len(self.lengths):
            return len(self.text)
        mark = chunk // _MARK
        return self.marks[mark] + sum(self.lengths[mark * _MARK : chunk])

    def since(self, chunk: int, most: int) -> tuple[int, str]:
        """The text of the run from its `chunk`-th chunk (0-based) to the chunk where it
        reaches `most` bytes, or to the run's end when fewer than JOIN_AFTER chunks would
        be left after that one; (that last chunk, the text)."""
        begin = self.begin(chunk)
        last, end = self._reaching(chunk, begin + most)
        if last >= len(self.lengths) - JOIN_AFTER:
            last, end = len(self.lengths) - 1, len(self.text)
        return last, self.text[begin:end].decode()

    def _reaching(self, chunk: int, offset: int) -> tuple[int, int]:
        """The first chunk from `chunk` on whose text ends at `offset` or after (the last
        chunk if none does), and where it ends."""
        mark = max(bisect_left(self.marks, offset) - 1, chunk // _MARK)
        index = max(mark * _MARK, chunk)
        end = self.begin(index) + self.lengths[index]
        while end < offset and index + 1 < len(self.lengths):
            index += 1
            end += self.lengths[index]
        return index, end

    def chunk(self, chunk: int) -> str:
        begin = self.begin(chunk)
        return self.text[begin : begin + self.lengths[chunk]].decode()


_MARK = 64  # a run keeps where every this many-th chunk begins


def _run_data(kind: WireType, run: _Run, chunk: int, text: str) -> dict:
    """The wire data of a run's text from its `chunk`-th chunk on (0-based): with how long
    its thinking has lasted when that text begins the thinking."""
    if kind == "REASONING" and chunk == 0:
        return {"text": text, "elapsed": _elapsed(run)}
    return {"text": text}


def _elapsed(run: _Run) -> float:
    """How long the run's thinking has lasted: to now, or to its end once it is over (a
    page that loads later folds it as what it lasted)."""
    return round((run.ended or time.monotonic()) - run.began, 1)


class TurnEvents:
    """The events of one turn in order, numbered from 1; see the module's docstring."""

    def __init__(self) -> None:
        self._starts: list[int] = []  # the seq of each entry's first event
        self._kinds: list[WireType] = []
        self._data: list[dict | _Run] = []
        self.seq = 0  # the last event's number (and the count of events)
        # The last event's text when it is a chunk of a run: what a follower that keeps up
        # asks for next, given without finding and decoding it in the run.
        self._last_text: str | None = None
        # The seq of the latest event of each LATEST_KEPT kind and key: the one kept.
        self._latest: dict[tuple[WireType, object], int] = {}

    def append(self, kind: WireType, data: dict | str) -> None:
        """Add the next event: a CHAT or REASONING chunk by its text alone, any other event
        (a REASONING one that is no chunk too) by its wire data."""
        self.seq += 1
        if type(data) is str:
            run = self._data[-1] if self._data and self._kinds[-1] == kind else None
            if type(run) is not _Run:
                run = _Run()
                self._entry(kind, run)
            run.add(data)
            self._last_text = data
        else:
            if (field := LATEST_KEPT.get(kind)) is not None:
                earlier = self._latest.get((kind, data.get(field)))
                if earlier is not None:
                    self._drop(earlier)
                self._latest[kind, data.get(field)] = self.seq
            self._entry(kind, data)
            self._last_text = None

    def _drop(self, seq: int) -> None:
        """Take the event numbered `seq` (an entry of its own) out of the log."""
        index = self._find(seq)
        del self._starts[index], self._kinds[index], self._data[index]

    def _entry(self, kind: WireType, data: dict | _Run) -> None:
        if self._data and type(self._data[-1]) is _Run:
            self._data[-1].ended = time.monotonic()
        self._starts.append(self.seq)
        self._kinds.append(kind)
        self._data.append(data)

    def _find(self, seq: int) -> int:
        return bisect_right(self._starts, seq) - 1

    def after(self, after: int) -> WireEvent | None:
        """What a follower that has seen up to seq `after` gets next; None when nothing yet.

        In a run of CHAT chunks: the next chunk, for a follower less than JOIN_AFTER chunks
        behind (as the chunks came); else the rest of the run, as one event of about
        CATCH_UP_BYTES at most.
        """
        seq = after + 1
        if seq == self.seq and self._last_text is not None:  # the chunk just published
            kind = self._kinds[-1]
            data = {"text": self._last_text}
            if kind == "REASONING" and seq == self._starts[-1]:
                data["elapsed"] = _elapsed(self._data[-1])
            return WireEvent(seq, kind, data)
        if seq > self.seq or seq < 1:
            return None
        index = self._find(seq)
        data = self._data[index]
        start = self._starts[index]
        if self._dropped(seq, index):  # the next event kept, after the gap
            return self.after(self._starts[index + 1] - 1)
        if type(data) is not _Run:
            return WireEvent(seq, self._kinds[index], data)
        count = len(data)
        kind = self._kinds[index]
        if start + count - seq <= JOIN_AFTER:
            return WireEvent(seq, kind, _run_data(kind, data, seq - start, data.chunk(seq - start)))
        last, text = data.since(seq - start, CATCH_UP_BYTES)
        return WireEvent(start + last, kind, _run_data(kind, data, seq - start, text))

    def at(self, seq: int) -> WireEvent:
        """The event numbered `seq`, a CHAT chunk on its own."""
        if not 1 <= seq <= self.seq or self._dropped(seq, index := self._find(seq)):
            raise IndexError(seq)
        data = self._data[index]
        if type(data) is not _Run:
            return WireEvent(seq, self._kinds[index], data)
        chunk, kind = seq - self._starts[index], self._kinds[index]
        return WireEvent(seq, kind, _run_data(kind, data, chunk, data.chunk(chunk)))

    def _dropped(self, seq: int, index: int) -> bool:
        """Whether `seq`, found in entry `index`, is the number of an event dropped from it
        (past the entry's one event, or past its run's chunks)."""
        data = self._data[index]
        held = len(data) if type(data) is _Run else 1
        return seq - self._starts[index] >= held

    def others(self) -> Iterator[tuple[WireType, dict]]:
        """Every event but the CHAT and REASONING chunks, in order, as (type, data)."""
        for kind, data in zip(self._kinds, self._data, strict=True):
            if type(data) is not _Run:
                yield kind, data

    def entries(self) -> int:
        """How many entries hold the events (a run of chunks is one)."""
        return len(self._data)

    def kept_bytes(self) -> int:
        """The bytes the CHAT runs keep: their text, their chunks' lengths and marks."""
        runs = [d for d in self._data if type(d) is _Run]
        return sum(
            len(r.text) + r.lengths.itemsize * len(r.lengths) + r.marks.itemsize * len(r.marks)
            for r in runs
        )
