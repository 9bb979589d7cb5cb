"""What one probe found, and the profile a self-test makes of them: typed, and stored as JSON."""

from dataclasses import dataclass, field

from rojos.models.capabilities import CAPABILITIES, Status

LABELS = {
    "stream": "a streamed answer",
    "tool_call": "a forced tool call",
    "parallel_calls": "two calls in one response",
    "usage": "usage in the stream",
    "reasoning": "the reasoning shape",
    "images": "image input",
    "listing": "the listed window and models",
    "options": "a refused option recovered",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeResult:
    """One capability: works, does not, or unknown (the test could not tell), and why."""

    capability: str
    status: Status
    reason: str
    detail: dict = field(default_factory=dict)  # facts the app acts on (window, shape, refused)

    def as_json(self) -> dict:
        return {"status": self.status, "reason": self.reason, "detail": self.detail}


def works(capability: str, reason: str, **detail) -> ProbeResult:
    return ProbeResult(capability=capability, status="works", reason=reason, detail=detail)


def does_not(capability: str, reason: str, **detail) -> ProbeResult:
    return ProbeResult(capability=capability, status="does_not", reason=reason, detail=detail)


def unknown(capability: str, reason: str, **detail) -> ProbeResult:
    return ProbeResult(capability=capability, status="unknown", reason=reason, detail=detail)


@dataclass(frozen=True, kw_only=True, slots=True)
class Profile:
    """A self-test's findings for one model, in the table's order."""

    model: str
    taken: str  # ISO 8601
    results: tuple[ProbeResult, ...]
    requests: int  # how many requests the test made

    def as_json(self) -> dict:
        return {
            "taken": self.taken,
            "requests": self.requests,
            "results": {r.capability: r.as_json() for r in self.results},
        }

    @classmethod
    def from_json(cls, model: str, data: dict) -> "Profile":
        """A stored profile, read back (capabilities it lacks are left out)."""
        results = data.get("results") or {}
        return cls(
            model=model,
            taken=str(data.get("taken") or ""),
            requests=int(data.get("requests") or 0),
            results=tuple(
                ProbeResult(
                    capability=name,
                    **{k: results[name][k] for k in ("status", "reason")},
                    detail=results[name].get("detail") or {},
                )
                for name in CAPABILITIES
                if isinstance(results.get(name), dict)
            ),
        )

    def rows(self) -> list[tuple[str, str, str]]:
        """(capability, status, reason) for each result, as the table shows them."""
        shown = {"works": "works", "does_not": "does not", "unknown": "unknown"}
        return [(LABELS[r.capability], shown[r.status], r.reason) for r in self.results]


def profile_table(profile: Profile) -> str:
    """The profile as a plain-text table (the command's output)."""
    rows = [("capability", "result", "why"), *profile.rows()]
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    lines = [f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c}" for a, b, c in rows]
    lines.insert(1, f"{'-' * widths[0]}  {'-' * widths[1]}  {'-' * 3}")
    return "\n".join(lines)
