"""The figures of sections 3 to 5: how the server holds up as conversations, files and
histories grow (concurrency, on SQLite and PostgreSQL; big files; queries per step).

Each function turns a benchmark's results into a report Section, every figure next to its
target; bench/run.py runs the benchmarks and calls them.
"""

from .report import Section

# Bounds of this benchmark's own: a read in parts holds at most twice the read limit.
READ_SECONDS_MAX = 1.0
LIST_PEAK_MIB_MAX = 16.0
LIST_RESULT_BYTES_MAX = 64 * 1024  # one page of a big directory, not all of it


def concurrency_section(results) -> Section:
    section = Section(
        "3. Concurrency",
        "Simultaneous conversations on one server process (a fresh one for each level), each "
        "one list_files call and then 100 chunks paced 20 ms apart, all started at once. "
        "Memory per stream is the server's peak RSS above its RSS after a warm-up "
        "conversation, divided by the conversations. More at once: section 11 (1,000 on "
        "SQLite), section 12 (500 on one process on PostgreSQL, with the connections it "
        "holds, then 1,000 on two processes).",
    )
    for r in results:
        failures = ", ".join(f"{n} x {what}" for what, n in r.failures.most_common(3))
        section.add(
            f"concurrency_{r.conversations}_completed",
            f"{r.completed}/{r.conversations}, {r.errors} errors",
            "all, 0 errors",
            r.completed == r.conversations,
            failures,
        )
        section.add(
            f"concurrency_{r.conversations}_memory_per_stream",
            f"{r.per_stream_kib:.0f} KiB",
            note=f"peak {r.peak_rss_mib:.0f} MiB, idle {r.idle_rss_mib:.0f} MiB",
        )
        latency = f"chunk latency p99 {r.p99_ms:.0f} ms, " if r.latencies_ms else ""
        section.add(
            f"concurrency_{r.conversations}_wall",
            f"{r.wall_s:.1f} s",
            note=f"{latency}server CPU {r.server_cpu_s:.1f} s; each stream alone takes 2 s",
        )
    return section


def big_files_section(costs, read_limit: int) -> Section:
    section = Section(
        "4. Big files",
        "The read tools through the registry, as the model calls them, on a 50 MB text file "
        "and a directory of 20,000 files. Time without tracing; peak memory of Python "
        "allocations under tracemalloc.",
    )
    read_peak_max = 2 * read_limit / 2**20
    for cost in costs:
        args = ", ".join(f"{k}={v}" for k, v in cost.args.items())
        peak_max = LIST_PEAK_MIB_MAX if cost.name == "list_files" else read_peak_max
        section.add(
            f"{cost.name}({args})",
            f"{cost.seconds * 1000:.1f} ms, peak {cost.peak_mib:.2f} MiB",
            f"≤ {READ_SECONDS_MAX:g} s, ≤ {peak_max:g} MiB",
            cost.seconds <= READ_SECONDS_MAX and cost.peak_mib <= peak_max,
            f"{cost.outcome}; {cost.result_bytes:,} bytes to the model",
        )
    listing = next(c for c in costs if c.name == "list_files")
    section.add(
        "list_files_paging",
        f"{listing.outcome} ({listing.result_bytes:,} bytes to the model)",
        f"paged, ≤ {LIST_RESULT_BYTES_MAX:,} bytes a result",
        "cut=True" in listing.outcome and listing.result_bytes <= LIST_RESULT_BYTES_MAX,
    )
    section.notes.append(
        "get_text_content refuses a file over ROJO_MAX_READ_BYTES before reading it and "
        "streams line by line with offset/limit; list_files reads the whole directory (to "
        "sort it) but gives the model one page of 500 entries at a time."
    )
    return section


def queries_section(counts) -> Section:
    section = Section(
        "5. Database",
        "Queries counted (CaptureQueriesContext) while the story runs through the agent loop, "
        "after 2 and after 50 stored messages; a step runs from one request to the provider "
        "to the next.",
    )
    base = counts[0]
    for count in counts:
        same = count.steps == base.steps and count.load == base.load
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(count.kinds.items()))
        section.add(
            f"queries_per_step_{count.prior}_prior",
            " + ".join(map(str, count.steps)),
            "" if count is base else f"the same as with {base.prior} prior",
            None if count is base else same,
            f"{kinds}; loading the history and storing the user's message: {count.load}",
        )
    section.notes.append(
        "Before each step and before each call the user's role in the project is read again "
        "(1 SELECT each, counted with the step before the request: a member removed or made "
        "a viewer mid-turn is stopped); a step stores its assistant message (1) and the "
        "response's usage record (1); a call that changes files reads the role once more "
        "under the change lock, after any approval (1), looks there for changes a crash cut "
        "off, to finish their records before this one (1, on the index of unfinished records: "
        "issue #31, point 8), and stores its result with its change record in one transaction "
        "(4: BEGIN, INSERT, INSERT, COMMIT); whatever the length of "
        "the conversation. The turn's first step also reads the budgets in force (1). The "
        "history is loaded once per turn, in one query, with the user's message stored in the "
        "same trip; fitting the request into the window takes none."
    )
    return section
