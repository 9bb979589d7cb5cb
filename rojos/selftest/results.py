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
        """A stored profile, read back; what it lacks or holds malformed is left out."""
        results = data.get("results") if isinstance(data.get("results"), dict) else {}
        requests = data.get("requests")
        return cls(
            model=model,
            taken=str(data.get("taken") or ""),
            requests=requests if isinstance(requests, int) else 0,
            results=tuple(
                found
                for name in CAPABILITIES
                if (found := _stored_result(name, results.get(name))) is not None
            ),
        )

    @property
    def verified_nothing(self) -> bool:
        """Every check unknown (a provider out of reach, a key refused): no pass."""
        return all(r.status == "unknown" for r in self.results)

    def nothing_verified_text(self, *, reason: bool = True) -> str:
        """What `test_rojo`, the API and the admin say when `verified_nothing`; with the first
        reason unless the table of every reason is shown beside it (`reason=False`)."""
        first = next((r.reason for r in self.results if r.reason), "") if reason else ""
        why = f" (the first: {first.rstrip('.')})" if first else ""
        return (
            f"Nothing was verified: every check is unknown{why}. Set the rojo right, then "
            "test it again."
        )

    def rows(self) -> list[tuple[str, str, str]]:
        """(capability, status, reason) for each result, as the table shows them."""
        shown = {"works": "works", "does_not": "does not", "unknown": "unknown"}
        return [(LABELS[r.capability], shown[r.status], r.reason) for r in self.results]


def _stored_result(name: str, item) -> ProbeResult | None:
    if not isinstance(item, dict) or item.get("status") not in ("works", "does_not", "unknown"):
        return None
    detail = item.get("detail")
    return ProbeResult(
        capability=name,
        status=item["status"],
        reason=str(item.get("reason") or ""),
        detail=detail if isinstance(detail, dict) else {},
    )


def profile_table(profile: Profile) -> str:
    """The profile as a plain-text table (the command's output)."""
    rows = [("capability", "result", "why"), *profile.rows()]
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    lines = [f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c}" for a, b, c in rows]
    lines.insert(1, f"{'-' * widths[0]}  {'-' * widths[1]}  {'-' * 3}")
    return "\n".join(lines)
