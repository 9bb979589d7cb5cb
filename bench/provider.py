"""The benchmarks' provider: the tests' FakeProvider, answering by scenario instead of a script.

It runs as a process of its own (`python -m bench.provider` prints its base URL), so its CPU
is never counted as the client's or the server's. The request's `model` names the scenario and
the tool messages after the last user message say which step of it is asked for, so any number
of conversations can run at once. Chunks whose text holds STAMP leave with the provider's
monotonic clock (ns) in its place, written at the moment they are sent.
"""

import os
import random
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from functools import cache
from typing import Any

from tests.support.fake_provider import (
    FakeProvider,
    Reply,
    Stream,
    _Handler,
    chunk,
    http_error,
    stream,
    text_chunks,
    tool_call_chunks,
)

STAMP = "@@SENT@@"

# The verification story: a directory (7 chunks), a 1.2 KB page in it (262 chunks: arguments
# come 5 characters a chunk), then a 200-chunk reply (201): 470 chunks in 3 responses.
STORY_MESSAGE = (
    "Create a directory at docs/intro and write an index.page file there with a page header "
    "and a short intro paragraph."
)
STORY_PAGE = (
    "# Introduction\n\n"
    + " ".join(
        [
            "Welcome to the project. This page introduces what it is about, who works on it,",
            "and where to start reading. The project keeps its documentation next to its code,",
            "so every change to how a part works comes with the change to how it is described.",
            "Start with the overview, then read the guide for the part you want to change.",
        ]
        * 3
    )
    + "\n\nEach guide starts with what the part is for, then how to run it, then how to test "
    "it; the reference pages list every setting with its default, and the changelog says what "
    "changed in each release and what to do about it when you upgrade from an older one. "
    "Enjoy it.\n"
)
STORY_REPLY = "I created docs/intro/index.page with a header and a short intro paragraph. " * 14


@cache
def story_replies(delay_ms: int = 0) -> tuple[Stream, ...]:
    """The story's three responses, their chunks `delay_ms` apart."""
    write = ("write_text_content", {"path": "docs/intro/index.page", "text": STORY_PAGE})
    return tuple(
        stream(*chunks, delay=delay_ms / 1000)
        for chunks in (
            tool_call_chunks([("create_directory", {"path": "docs/intro"})]),
            tool_call_chunks([write]),
            text_chunks(STORY_REPLY, pieces=200),
        )
    )


@cache
def paced_reply(chunks: int, delay_ms: int) -> Stream:
    """`chunks` one-word text deltas, each stamped when sent, `delay_ms` apart."""
    deltas = [chunk({"content": f"{STAMP} "}) for _ in range(chunks)]
    deltas[0]["choices"][0]["delta"]["role"] = "assistant"
    return stream(*deltas, chunk({}, "stop"), delay=delay_ms / 1000)


@cache
def long_reply(chunks: int) -> Stream:
    """`chunks` text deltas of one word each, sent as fast as the connection takes them."""
    deltas = [chunk({"content": f"word{n % 1000} "}) for n in range(chunks)]
    deltas[0]["choices"][0]["delta"]["role"] = "assistant"
    return stream(*deltas, chunk({}, "stop"))


@cache
def list_call() -> Stream:
    return stream(*tool_call_chunks([("list_files", {"path": ""})]))


@dataclass(frozen=True)
class Scenario:
    """What the request's model asks for: `kind[-chunks-ms][-together-n]`."""

    kind: str
    chunks: int = 0
    delay_ms: int = 0
    together: int = 1

    @classmethod
    def parse(cls, model: str) -> "Scenario | None":
        match = _SCENARIO.match(model)
        if not match:
            return None
        given = match.groups()[1:]
        numbers = [int(n) if n else default for n, default in zip(given, (0, 0, 1), strict=True)]
        return cls(match[1], *numbers)


_SCENARIO = re.compile(r"^(story|paced|tool-paced|long)(?:-(\d+)-(\d+))?(?:-together-(\d+))?$")


def _step(body: dict) -> int:
    """Tool messages after the last user message: the step of the turn being asked for."""
    step = 0
    for message in body.get("messages") or ():
        if message.get("role") == "user":
            step = 0
        elif message.get("role") == "tool":
            step += 1
    return step


def reply_for(scenario: Scenario | None, step: int) -> Reply | None:
    """The reply a scenario gives at a step of its turn.

    story[-0-<ms>]         the verification story, in three requests (chunks ms apart)
    paced-<n>-<ms>         n stamped text chunks, ms apart
    tool-paced-<n>-<ms>    one list_files call, then n stamped text chunks ms apart
    long-<n>-0             n text chunks of a word each, unstamped, at once
    """
    if scenario is None:
        return None
    if scenario.kind == "story" and step < 3:
        return story_replies(scenario.delay_ms)[step]
    if scenario.kind == "paced" and step == 0 and scenario.chunks:
        return paced_reply(scenario.chunks, scenario.delay_ms)
    if scenario.kind == "long" and step == 0 and scenario.chunks:
        return long_reply(scenario.chunks)
    if scenario.kind == "tool-paced" and scenario.chunks:
        return list_call() if step == 0 else paced_reply(scenario.chunks, scenario.delay_ms)
    return None


class _StampingHandler(_Handler):
    def _write_chunk(self, text: str) -> None:
        if STAMP in text:
            text = text.replace(STAMP, str(time.monotonic_ns()))
        super()._write_chunk(text)


class BenchProvider(FakeProvider):
    """FakeProvider that answers by scenario, stamps chunks, and records nothing."""

    def __init__(self) -> None:
        super().__init__()
        self._server.RequestHandlerClass = _StampingHandler
        # Hundreds of conversations connect at once; the default backlog of 5 would drop SYNs.
        self._server.socket.listen(1024)
        self._barriers: dict[str, threading.Barrier] = {}

    def _take(self, body: dict[str, Any], headers: dict[str, str], peer=None) -> Reply:
        model = str(body.get("model", ""))
        scenario = Scenario.parse(model)
        step = _step(body)
        reply = reply_for(scenario, step)
        if reply is None:
            message = f"bench provider: no step {step} of {model!r}"
            return http_error(400, {"error": {"message": message}})
        if scenario.together > 1 and isinstance(reply, Stream) and reply.delay:
            self._wait_for_the_others(model, scenario.together)
            # Streams in step would reach the server in bursts; real ones arrive at any phase.
            time.sleep(random.uniform(0, reply.delay))
        return reply

    def _wait_for_the_others(self, model: str, parties: int) -> None:
        """Hold a paced stream until `parties` of them are asked for: all stream at once."""
        with self._lock:
            barrier = self._barriers.setdefault(model, threading.Barrier(parties))
        try:
            barrier.wait(timeout=120)
        except threading.BrokenBarrierError:
            with self._lock:
                self._barriers.pop(model, None)


@dataclass
class ProviderProcess:
    """The provider running in a process of its own."""

    process: subprocess.Popen
    base_url: str

    def stop(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=10)


def provider_start(env: dict[str, str]) -> ProviderProcess:
    """Start `python -m bench.provider`; it serves until its stdin is closed."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.provider"],
        env={**os.environ, **env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    return ProviderProcess(process=process, base_url=process.stdout.readline().strip())


def main() -> None:
    provider = BenchProvider()
    print(provider.base_url, flush=True)
    try:
        sys.stdin.read()  # serve until the benchmark closes the pipe
    finally:
        provider.close()


if __name__ == "__main__":
    main()
