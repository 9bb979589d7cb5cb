"""Figures against their targets: printed as `name: value (target ...)` lines, and as Markdown."""

import os
import platform
import socket
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

PACKAGES = (
    "django",
    "openai",
    "aiohttp",
    "httpx2",
    "orjson",
    "uvicorn",
    "httptools",
    "django-ninja",
    "channels",
)


@dataclass(frozen=True)
class Figure:
    """One measured value; `met` is None for a figure reported without a target."""

    name: str
    value: str
    target: str = ""
    met: bool | None = None
    note: str = ""

    def line(self) -> str:
        text = f"{self.name}: {self.value}"
        if self.target:
            text += f" (target {self.target})"
        if self.met is not None:
            text += " ok" if self.met else " MISSED"
        return text + (f"  [{self.note}]" if self.note else "")


@dataclass
class Section:
    title: str
    what: str
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *args, **kwargs) -> Figure:
        figure = Figure(*args, **kwargs)
        self.figures.append(figure)
        print(figure.line(), flush=True)
        return figure


def load() -> str:
    """The 1-, 5- and 15-minute load averages: anything else running skews every figure."""
    return " / ".join(f"{n:.2f}" for n in os.getloadavg())


def _python_ms() -> float:
    """CPU time of a fixed piece of pure Python (a loop of arithmetic and dict stores)."""
    started = time.process_time()
    seen: dict[int, int] = {}
    for number in range(1_000_000):
        seen[number & 1023] = number * 3 % 7
    return (time.process_time() - started) * 1000


def _kernel_us() -> float:
    """CPU time of one 64-byte send and its recv on a local socket pair: the kind of work
    the floor's relaying is mostly made of."""
    left, right = socket.socketpair()
    payload, rounds = b"x" * 64, 20_000
    try:
        started = time.process_time()
        for _ in range(rounds):
            left.send(payload)
            right.recv(64)
        return (time.process_time() - started) * 1e6 / rounds
    finally:
        left.close()
        right.close()


def yardsticks() -> dict[str, str]:
    """The host's speed at the two kinds of work the figures divide: Python's (a turn's
    start, the loop, the SDK) and the kernel's (the floor's reads and writes). Hosts
    differ in each apart: on 7 December 2026 section 1's reference (the SDK's typed
    chunks, all Python) took 204 and 228 ms on one host (these yardsticks there: 183 ms
    and 5.2 µs) and 77 ms on another hours before, while the floor's sequential story took
    34 and 49 ms on the first and 31 on the other: what is Python's moved 2.6-fold with
    the host, the floor's far less, and every ratio of the one to the other with it, the
    code the same. Medians of 3, about a second in all."""
    python = statistics.median(_python_ms() for _ in range(3))
    kernel = statistics.median(_kernel_us() for _ in range(3))
    return {
        "Python's speed (1 M loop passes of arithmetic and dict stores, CPU)": f"{python:.0f} ms",
        "the kernel's (a 64-byte send and its recv on a socket pair, CPU)": f"{kernel:.1f} µs",
    }


def machine(load_before: str) -> dict[str, str]:
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    facts = {
        "CPU": cpu,
        "cores": str(os.cpu_count()),
        "OS": f"{platform.system()} {platform.release()}",
        "Python": sys.version.split()[0],
        "load average (1 / 5 / 15 min) before the run": load_before,
        **yardsticks(),
    }
    for package in PACKAGES:
        try:
            facts[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            facts[package] = "not installed"
    return facts


def markdown(sections: list[Section], facts: dict[str, str], started: datetime, took: float) -> str:
    lines = [
        "# Performance",
        "",
        "Written by `make bench` (`bench/run.py`); the figures below are from its last run.",
        "Every figure is measured against the fake provider of the tests",
        "(`tests/support/fake_provider.py`), run in a process of its own; the server is",
        "`roject.asgi:application` under uvicorn in another, on a fresh SQLite database, with",
        "production settings (`DEBUG` off).",
        "",
        f"Run on {started:%Y-%m-%d %H:%M} UTC, in {took:.0f} s.",
        "",
        "| Machine | |",
        "| --- | --- |",
        *(f"| {key} | {value} |" for key, value in facts.items()),
        "",
    ]
    missed = [f for s in sections for f in s.figures if f.met is False]
    if missed:
        lines += ["**Missed targets:** " + ", ".join(f"`{f.name}`" for f in missed) + ".", ""]
    for section in sections:
        lines += section_markdown(section)
    return "\n".join(lines)


def now() -> datetime:
    return datetime.now(UTC)


def section_markdown(section: Section) -> list[str]:
    """One section of the report, as Markdown lines."""
    lines = [f"## {section.title}", "", section.what, ""]
    lines += ["| Figure | Value | Target | |", "| --- | --- | --- | --- |"]
    for f in section.figures:
        verdict = "" if f.met is None else ("ok" if f.met else "**MISSED**")
        value = f.value + (f" ({f.note})" if f.note else "")
        lines.append(f"| `{f.name}` | {value} | {f.target or '—'} | {verdict} |")
    lines.append("")
    lines += [f"- {note}" for note in section.notes]
    if section.notes:
        lines.append("")
    return lines


def section_carried(report: str, earlier: str, number: int, how: str) -> str:
    """`report` with section `number` of an `earlier` report put back in its place.

    A section too long for `make bench` (it runs for minutes on its own) keeps the figures of
    its own last run, marked as such, instead of vanishing from the report.
    """
    start = earlier.find(f"\n## {number}. ")
    if start < 0:
        return report
    end = earlier.find("\n## ", start + 1)
    text = earlier[start + 1 : end + 1 if end >= 0 else None].rstrip() + "\n"
    heading, _, body = text.partition("\n")
    mark = f"_Not run by `make bench`: figures of its own last run ({how})._"
    if mark not in body:
        body = f"\n{mark}\n{body}"
    text = f"{heading}\n{body}"
    for later in range(number + 1, number + 20):
        at = report.find(f"\n## {later}. ")
        if at >= 0:
            return report[: at + 1] + text + "\n" + report[at + 1 :]
    return report.rstrip() + "\n\n" + text


def section_replaced(report: str, section: Section) -> str:
    """The report with `section` in place of the one of the same title (else at the end);
    a section `make bench` does not run keeps the line that says so."""
    heading = f"## {section.title}"
    new = "\n".join(section_markdown(section)).rstrip() + "\n"
    start = report.find(heading)
    if start < 0:
        return report.rstrip() + "\n\n" + new
    end = report.find("\n## ", start + len(heading))
    old = report[start : end if end >= 0 else None]
    mark = next((line for line in old.splitlines() if line.startswith("_Not run by")), None)
    if mark is not None:
        title, _, body = new.partition("\n")
        new = f"{title}\n\n{mark}\n{body}"
    return report[:start] + new + ("\n" + report[end + 1 :] if end >= 0 else "")
