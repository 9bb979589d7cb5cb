"""The figures of section 6: keeping conversations inside the model's context window.

bench/compaction.py measures; this turns its results into the report's Section.
"""

from .report import Section

BUILD_MS_MAX = 20.0


def window_section(builds, sessions) -> Section:
    section = Section(
        "6. Context window",
        "Building a compacted request (TurnRequests._prepare: every message's size, stubs "
        "for old tool results, cuts, the request) for a stored conversation far over a "
        "12,000-token window, median of 30 builds, and its database queries; then a session "
        "of the tests' long conversation (a 16 KB note read per message, a model answering "
        "from what it is sent) through the agent loop against the fake provider.",
    )
    base = builds[0]
    for build in builds:
        if build.summary:
            kind = "a summary stored"
        elif build.request_tokens > 12_000:
            kind = "no summary yet: one is due, the stubs alone are over the window"
        else:
            kind = "no summary needed"
        name = "summary" if build.summary else "stubs"
        section.add(
            f"compacted_request_{build.messages}_messages_{name}",
            f"{build.median_ms:.1f} ms",
            f"≤ {BUILD_MS_MAX:g} ms" if build.messages >= 500 else "",
            build.median_ms <= BUILD_MS_MAX if build.messages >= 500 else None,
            f"{kind}; max {build.max_ms:.1f} ms; request ≈ {build.request_tokens:,} tokens",
        )
    for build in builds:
        if build.summary:
            continue
        section.add(
            f"compacted_request_{build.messages}_messages_queries",
            str(build.queries),
            "" if build is base else f"the same as for {base.messages} messages",
            None if build is base else build.queries == base.queries,
            "loading the history (one query) and building the request (none)",
        )
    for session in sessions:
        extra = session.summaries / session.replies if session.replies else 0
        section.add(
            f"compaction_model_calls_{session.messages}_messages",
            f"{session.summaries} summaries for {session.replies} replies (+{extra:.0%})",
            note=f"{session.overflowed} requests refused as too long; the largest request "
            f"{session.max_request_tokens:,} of 12,000 tokens",
        )
    section.notes.append(
        "Old tool results are replaced by a one-line stub in the request (never in the "
        "database); when stubs are not enough the oldest turns are summarised by the rojo's "
        "own model, so that the kept turns fill at most 60 % of the budget and the next "
        "steps need no summary at once."
    )
    return section
