"""The figures of the floor section: the app's costs as ratios to the floor's (issue #22),
and turn starts under a burst, each beside its target."""

from .report import Section
from .starts import (
    BURST,
    BURST_CHUNKS,
    BURST_MODEL,
    CHUNK_GAP_MS,
    PACED_RUNS,
    RUNNING,
    RUNNING_MODEL,
    BurstResult,
)
from .stats import median

# Issue #22's targets, the per-chunk and burst ones as issue #38 set them again (one process
# on 2 cores: a burst's first chunks within 1 s and 2 s, the running streams' p99 50 ms).
SEQUENTIAL_RATIO_MAX = 3.0
PER_CHUNK_RATIO_MAX = 1.2
PACED_RATIO_MAX = 1.3
FIRST_CHUNK_P50_MS = 1000.0
FIRST_CHUNK_P99_MS = 2000.0
RUNNING_P99_MS = 50.0
PER_STREAM_KIB = 150.0


def _ratio(section: Section, name: str, app: float, floor: float, unit: str, limit=None):
    ratio = app / floor if floor else float("inf")
    section.add(
        name,
        f"{ratio:.2f}x",
        f"≤ {limit:g}x" if limit else "",
        ratio <= limit if limit else None,
        f"app {app:.3g} {unit}, floor {floor:.3g} {unit}",
    )


def _burst_figures(section: Section, label: str, result: BurstResult, floor: BurstResult):
    met = result.completed == BURST and not result.errors
    section.add(
        f"{label}_burst_completed",
        f"{result.completed} of {BURST}",
        f"{BURST}",
        met,
        f"{len(result.errors)} errors" + (f": {result.errors[0]}" if result.errors else ""),
    )
    for name, value, floor_value, limit in (
        ("p50", result.first_p50, floor.first_p50, FIRST_CHUNK_P50_MS),
        ("p99", result.first_p99, floor.first_p99, FIRST_CHUNK_P99_MS),
    ):
        section.add(
            f"{label}_first_chunk_{name}",
            f"{value / 1000:.2f} s",
            f"≤ {limit / 1000:g} s",
            value <= limit,
            f"{value / floor_value:.1f}x the floor's {floor_value / 1000:.2f} s",
        )
    section.add(
        f"{label}_running_p99_during_burst",
        f"{result.during_p99:.1f} ms",
        f"≤ {RUNNING_P99_MS:g} ms",
        result.during_p99 <= RUNNING_P99_MS,
        f"{result.before_p99:.1f} ms the second before; the floor's {floor.during_p99:.1f} ms; "
        f"burst {result.burst_s:.1f} s, server CPU {result.server_cpu_s:.1f} s",
    )


def _start_budget(burst: BurstResult, per_chunk_us: float) -> str:
    """This run's burst taken apart by its own figures: what a start costs now, and what the
    p99 target leaves a start once the chunks that stream meanwhile have had their CPU."""
    if not burst.burst_s or not burst.server_cpu_s:
        return "The burst did not run: no budget of a start to give."
    running_rate = RUNNING * 1000 / CHUNK_GAP_MS  # the running streams' chunks a second
    running = running_rate * burst.burst_s * per_chunk_us / 1e6
    own = BURST * BURST_CHUNKS * per_chunk_us / 1e6  # the burst's replies, all streamed
    now_ms = (burst.server_cpu_s - running - own) * 1000 / BURST
    window = FIRST_CHUNK_P99_MS / 1000
    left = window - running_rate * window * per_chunk_us / 1e6 - own
    need_ms = left * 1000 / BURST
    return (
        f"This run's burst by its own figures: {burst.server_cpu_s:.1f} s of server CPU in "
        f"{burst.burst_s:.1f} s, of which the running streams' chunks about {running:.2f} s "
        f"({running_rate:.0f} a second at the steady {per_chunk_us:.0f} µs) and the burst's "
        f"own {BURST * BURST_CHUNKS} chunks about {own:.2f} s: a start about {now_ms:.1f} ms. "
        f"For every first chunk within {window:g} s on the process's one core for Python, "
        f"the starts get what the chunks leave of it, {left:.2f} s: {need_ms:.1f} ms a start, "
        f"{need_ms / now_ms:.0%} of now (the median's target asks the same of half the "
        "starts in half the time). The cut is larger than any one part of a start measured "
        "so far (the notes below and section 14)."
    )


def floor_section(floor, app: dict) -> Section:
    """`floor`: bench.starts.FloorFigures; `app`: the same run's figures of the app."""
    section = Section(
        "10. Against the floor, and turn starts",
        "The floor is a bare aiohttp relay (`bench/floor.py`) that forwards the provider's "
        "bytes unchanged: the least any server can spend to relay a stream. It runs beside "
        "the app in the same run, on the same provider and loads, and each figure of the app "
        "is given as a ratio to it. Sequential: the verification story (section 1, `instant`, "
        "the server's share); at 200: section 3's tool-paced conversations; per chunk: "
        "200 paced streams once all have started (bench/steady.py: server CPU over the chunks "
        "of a 1.5 s window; `with_starts`: section 2's run, server CPU over all its chunks, "
        "the 200 turn starts included); paced: one conversation of `paced-500-20` (500 "
        "chunks 20 ms apart) on the app and one on the floor at the same time, each's start and "
        f"end included: of {PACED_RUNS} such pairs, the one whose ratio is the median; "
        "memory: peak RSS above idle per stream at 200 (section 3). The burst: "
        f"{RUNNING} streams of `{RUNNING_MODEL}` run when {BURST} conversations of "
        f"`{BURST_MODEL}` ({BURST_CHUNKS} chunks) start at once; first chunk timed from the "
        "request, and the running streams' chunk latency during the burst. `before_` is the "
        "same burst on a server from BENCH_BASELINE_TREE (the tree before the change), in "
        "the same run.",
    )
    _ratio(
        section,
        "cpu_per_conversation_sequential_vs_floor",
        app["sequential_cpu_ms"],
        floor.sequential_cpu_ms,
        "ms",
        SEQUENTIAL_RATIO_MAX,
    )
    _ratio(
        section,
        "cpu_per_conversation_200_vs_floor",
        app["concurrent_cpu_ms"],
        floor.concurrent_cpu_ms,
        "ms",
    )
    _ratio(
        section,
        "cpu_per_chunk_200_streams_vs_floor",
        app["per_chunk_us"],
        floor.per_chunk_us,
        "µs",
        PER_CHUNK_RATIO_MAX,
    )
    _ratio(
        section,
        "cpu_per_paced_conversation_vs_floor",
        app["paced_cpu_ms"],
        floor.paced_cpu_ms,
        "ms",
        PACED_RATIO_MAX,
    )
    _ratio(
        section,
        "cpu_per_chunk_200_streams_with_starts_vs_floor",
        app["per_chunk_with_starts_us"],
        floor.per_chunk_with_starts_us,
        "µs",
    )
    # MEMORY: the "memory" helper's bench/stream_memory.py figures go here, beside these.
    section.add(
        "memory_per_stream_200_vs_floor",
        f"{app['per_stream_kib'] / max(floor.per_stream_kib, 1):.1f}x",
        f"app ≤ {PER_STREAM_KIB:g} KiB",
        app["per_stream_kib"] <= PER_STREAM_KIB,
        f"app {app['per_stream_kib']:.0f} KiB, floor {floor.per_stream_kib:.0f} KiB",
    )
    for label, result in app["bursts"].items():
        _burst_figures(section, label, result, floor.burst)
    app_burst = app["bursts"]["app"]
    section.notes += [
        "The CPU per chunk, steady state (issue #22's figure): `with_starts` was the figure "
        "before, and 200 turn starts at ~14 ms each are most of it (~140 µs of ~160 µs per "
        "chunk), which hid the per-chunk path. Measured by hand with `python -m "
        "bench.per_chunk` (the same 200 streams, medians of 3-4 interleaved rounds, on the "
        "shared machine at load 4-12; before and after in the same run): the servers on "
        "one tree, floor 50 µs: uvicorn with h11 76 µs (1.51x), with httptools 58 (1.15x), "
        "uvloop with h11 85 (1.68x), uvloop with httptools 65 (1.29x), daphne 73 (1.44x): "
        "uvicorn with httptools became the production command and the bench's server, "
        "uvloop was left out. Then one step at a time: the write timeout's timer only while "
        "uvicorn's writing is paused (it was a Timeout and a timer-heap entry per chunk), 71 "
        "-> 63 µs (floor 53); no quiet-spell timer on the provider's reads before a tool call "
        "forms, 63 -> 56 µs (floor 51); the events of one loop iteration in one write "
        "(Turn.follow_batches), 67 -> 74 µs (floor 66) and 61 -> 65 µs (floor 64, load 7-13) "
        "in two pairs: within the round-to-round noise (±15%), as a paced stream "
        "brings one chunk per read (batches of one); it counts where a read brings several "
        "events. What is left, by py-spy on the steady state (200 streams, 12 s): the send() "
        "syscall 16%, Django's streaming response (send_response, its async wrappers) and "
        "uvicorn's send 10%, reading from aiohttp 8%, orjson parse and the SSE lines 6%, the "
        "loop and the accumulator 8%, Turn.publish/follow and encoding 6%, draft saves on the "
        "database threads 10% (one per stream every ROJO_DRAFT_SECONDS). Two runs of the "
        "same tree on 4 December 2026, minutes apart, gave 1.04x and 1.56x (app 72 and "
        "103 µs, floor 70 and 66 µs): the window is 1.5 s of a shared host's time, and the "
        "second run's other figures moved as much (its 200 streams' latency p99 761 ms "
        "against 492).",
        f"A start costs the app about {app_burst.server_cpu_s * 1000 / BURST:.0f} ms of server "
        f"CPU ({app_burst.server_cpu_s:.1f} s for the burst, the running streams' chunks "
        "included), on one core for the process: the burst's first chunks wait for that CPU, "
        "not for the database. What a conversation does besides the floor's relaying: 7 "
        "crossings to the database threads and back (`python -m bench.starts --crossings` "
        "counts them on one chat; 10 before the turn took the role and budgets its request "
        "read, 4 December 2026, and 8 before Django's request_started receivers, sync and "
        "with nothing to do on the pool's threads, were taken off, 5 December: "
        "roject/server/db_threads.py; a request 0.1 to 0.2 ms of CPU less, every API "
        "request 5 to 9%): the session's user, the chat's checks, the turn's claim, the "
        "reply's message and its usage record, the turn's end, and the response's close "
        "(request_finished's receivers); each is a thread handoff "
        "under the GIL. Django's middlewares run their "
        "hooks on the loop (roject/server/loop_middleware.py) and the API's auth crosses only to "
        "read (roject/identity/token_auth.py): 20 crossings before. Then the SDK request, the "
        "history and the turn's events.",
        _start_budget(app_burst, app["per_chunk_us"]),
        "Starts admitted a few at a time, in order (rojos/turns/admission.py, "
        "ROJO_START_CONCURRENCY, 16 since 5 December 2026; a start's place given back "
        "once its provider request "
        "leaves). Measured by hand on an idle machine (4 December 2026, `python -m "
        "bench.starts`, one burst a line; the before tree and this one interleaved): "
        "without the gate (before, or ROJO_START_CONCURRENCY=200) first chunk p50 3.40, "
        "4.59, 4.95 s, p99 3.47, 4.91, 5.05 s, the running streams' p99 373, 457, 409 ms; "
        "with 1: 4.80 s, 8.29 s, 166 ms; 4: 3.85 and 4.32 s, 7.65 and 7.74 s, 178 and 164 "
        "ms; 8: 4.72 and 3.77 s, 8.69 and 6.30 s, 134 and 134 ms; 16: 3.50 and 3.38 s, 6.53 "
        "and 6.12 s, 191 and 169 ms. The server's CPU for the burst is the same either way "
        "(31 to 41 ms a start, the running streams' chunks included): the gate decides who "
        "has it first. Without it all starts share the loop and end late together, and the "
        "running streams wait behind all of them; with it the starts end in order (the "
        "median about the same, the last later) and the running streams wait behind eight. "
        "It meets neither target: both need a cheaper start (next note). Once starts were "
        "cheaper (the prepared reads, below), 16 did better than 8 (5 December 2026, "
        "`ROJO_START_CONCURRENCY=<n> python -m bench.starts --sequential 10`, the sizes "
        "interleaved, five rounds): first chunk p50 1.25, 1.27, 1.26, 1.44, 1.39 s at 16 "
        "against 1.41, 1.46, 1.44, 1.52, 1.52 s at 8, lower in each pair; the running "
        "streams' p99 61, 57, 74, 60, 52 ms against 73, 83, 63, 75, 57 ms; at 32 the p50 "
        "1.24, 1.20, 1.31 s, the running p99 81, 65, 70 ms. The default became 16.",
        "A chat takes its place before Django's request path, once its body is in "
        "(rojos/web/chat_admission.py, 6 December 2026), not in the view: before, each of "
        "200 chats sent at once had its session, user and CSRF checks done (the session and "
        "user read on the database threads) before the first admitted one went on, and the "
        "running streams waited behind all of that at once. Every check still runs, after "
        "the place; a refused request gives it back as it is answered. Measured by hand on "
        "a machine about twice as slow as the day before (`BENCH_BASELINE_TREE=<the tree "
        "before> python -m bench.starts --rounds 3` then `--rounds 4`, interleaved, each on "
        "a fresh server): the running streams' p99 during the burst 192, 155, 123, 136, "
        "136, 79, 130 ms before against 91, 95, 58, 65, 61, 61, 64 ms after, lower in each "
        "pair; first chunk p50 2.28, 2.69, 2.55, 2.33, 1.63, 2.15, 2.15 s against 2.46, "
        "2.72, 1.74, 1.92, 1.97, 2.03, 2.07 s (per ms of the burst's CPU a start, whose "
        "spread is the machine's: medians 0.110 and 0.100 s), the p99 the same (all the "
        "starts' work comes before the last).",
        "A reply's writes after the starts (rojos/turns/admission.py: starts_settled; "
        "issue #38, 6 December 2026): once a response has streamed, its step's writes (the "
        "reply's message, its usage record, then the turn's end) wait until no start on the "
        "process holds or waits for a place, at most ROJO_END_YIELD_SECONDS (3 s). The "
        "burst's replies are 0.4 s long, so most ended while later starts still queued, and "
        "their stores took the one core for Python from them; their text had already "
        "streamed, only the stores and the DONE wait. Measured by hand (`python -m "
        "bench.starts`'s burst, the tree before and this one interleaved, three rounds, each "
        "on a fresh server, load 1.4 to 1.9): first chunk p50 1.85, 1.48, 1.74 s before "
        "against 1.29, 1.13, 1.32 s after, p99 3.31, 3.04, 3.32 s against 2.27, 2.08, 2.43 "
        "s, the running streams' p99 54, 45, 56 ms against 33, 34, 42 ms. The bound of what "
        "this can buy, measured the same way by storing every reply 4 s late: p50 1.20 and "
        "1.17 s, p99 2.13 and 2.18 s. Waiting for the starts to stay settled 50 ms, not "
        "just to settle, bought nothing (p50 1.22, 1.26, 1.41 s). ROJO_START_CONCURRENCY "
        "checked again with it (two rounds each, interleaved): 16 p50 1.14 and 1.33 s, p99 "
        "2.31 and 2.35 s, running p99 35 and 39 ms; 8: 1.22 and 1.69 s, 2.32 and 3.11 s, 20 "
        "and 30 ms; 32: 1.43 and 1.23 s, 2.27 and 2.18 s, 74 and 57 ms; 4: 1.63 and 1.46 s, "
        "2.91 and 3.22 s; 16 stays.",
        "The database threads: ROJO_DB_THREADS long-lived threads (8 until 5 December "
        "2026), each keeping its "
        "SQLite connection; sized by running this burst with 2, 4, 8, 16 and 32 threads, "
        "twice, on the shared machine: 8 gave the shortest first chunk both times, and more "
        "threads cost more CPU (GIL contention: 2.6 s for the burst at 8, 3.6 s at 32). "
        "Again on a quiet machine (5 December 2026, `ROJO_DB_THREADS=<n> python -m "
        "bench.starts --sequential 10`, one burst a line, the sizes interleaved, load 0.1 to "
        "1.7): first chunk p50 at 8 threads 2.02, 1.81, 1.76, 2.11 s, at 4 1.74, 1.69, 1.59, "
        "1.78 s, at 3 1.81, 1.89 s; the running streams' p99 at 8 107, 131, 82, 135 ms, at 4 "
        "72, 67, 58, 77 ms, at 3 45, 48 ms (2 threads: 1.80 s and 52 ms, and one burst of "
        "3.36 s and 155 ms with the machine busy before it). Fewer threads leave the event "
        "loop waiting less for the GIL behind the ORM. So the default became 3 on SQLite "
        "(issue #38, 5 December 2026; 8 on PostgreSQL, whose trips wait on the network, "
        "which more threads overlap: not measured here). A small pool cannot deadlock: a "
        "lane's calls run on whichever thread is free, so no transaction spans two calls (it "
        "would go on on another thread's connection), and a writer holding SQLite's lock or "
        "a row lock holds it within one call, on a thread it has; the calls waiting on it "
        "free theirs once it commits (tests/server/test_db_threads.py: forty lanes of write "
        "transactions through two threads all finish; one transaction split over two calls "
        "fails there). What it gives up: as many slow calls as threads (a long write, a busy "
        "database) hold up the others' reads; SQLite's writers take turns on one lock in any "
        "case. Before and after in one run (`BENCH_BASELINE_TREE=<the tree before> python -m "
        "bench.starts --sequential 30 --rounds 3`, with a request's start no longer a trip, "
        "next note): the running streams' p99 during the burst 73.9, 53.8, 95.0 ms at 8 "
        "against 39.0, 46.0, 48.9 ms at 3; first chunk p50 1.78, 1.73, 1.70 s against 1.67, "
        "1.63, 1.64 s. The p99 moves with the machine from run to run (41 to 84 ms at 3 "
        "threads in later runs of the same tree).",
        "The middlewares on the loop and the auth without trips, measured by hand (`python -m "
        "bench.starts`, before/after trees in interleaved rounds, each on a fresh server): "
        "server CPU per conversation of `paced-20-20` one at a time, 60 each, three rounds at "
        "load 0.6 to 2.5: 41.4 ms before (20 trips), 39.8 ms with the middlewares on the loop "
        "(7), 39.3 ms with the auth too (6): about 0.15 ms per trip, 5% of a conversation. "
        "The burst in the same pairs, at load 5 to 9 (other sessions' tests and benchmarks): "
        "first chunk p50 4.65 and 5.70 s before, 4.19 and 6.25 s with the middlewares, 5.02 "
        "and 3.64 s with both; the noise of the shared machine is larger than the change. "
        "Again with the burst, two rounds at load 8 to 34: CPU per conversation 40.1, 36.5 "
        "and 35.3 ms; first chunk p50 4.93 and 5.52 s, 5.30 and 3.78 s, 3.99 and 5.09 s; the "
        "running streams' p99 830 to 1,100 ms in all; 200 of 200 complete in all. The trips "
        "were not what a start's CPU is spent on.",
        "Where a conversation's CPU goes (3 December 2026, `python -m bench.starts --no-burst "
        "--sequential 200`, 29.5 to 31.6 ms of server CPU per `paced-20-20` conversation at "
        "load 1.1 to 1.7; `py-spy record --gil` on the server for 25 s, about 55 "
        "conversations): the samples holding the GIL are about 64% of the process's CPU, the "
        "rest is the kernel (the sends, epoll, the database threads' hand-offs). Of the GIL's "
        "samples: the ORM on the database threads 25% (the chat's checks, chat_context_get, "
        "6.4%; the claim and the user's message, turn_start._begin, 5.5%; the rojo's read "
        "3.4%; the turn's end 3.0%; the budgets 2.3%; the role's re-check before a tool step "
        "2.3%), the turn's loop 17% (the SDK building and sending its request 5.5%, reading "
        "and parsing the stream 4%), Django's ASGI handler, the middlewares and django-ninja "
        "6%, the response's writes 4%, the event loop itself (epoll, handles, wake-ups) about "
        "15%. No one place holds it: the targets (first chunk p50 0.5 s, p99 1 s for 200 "
        "starts on one core) need about 5 ms per start, a sixth of now, which takes the "
        "start's reads from per-process caches (rojo, project, role, budgets), its writes "
        "as one statement batch, and the provider's request without the SDK's request "
        "building; not done. The in-process sampler (BENCH_PROFILE) is not the tool for "
        "this: its SIGPROF signals coalesce while a database thread holds the CPU (about 650 "
        "samples for 3 s of CPU) and asyncio's wake-up descriptor turns each into a wake-up "
        "of the loop, which shows as select() and _write_to_self.",
        "The start again by its parts, on 7 December 2026 (an AMD host whose Python ran "
        "about 2.6 times slower than the Intel host of that morning: see the machine "
        "table's two yardsticks), `py-spy record --gil` over 300 chats of a 2-chunk reply "
        "one after another (24 ms of server CPU each there): the request's way through "
        "Django, its middlewares and django-ninja 18% (of it the API's auth with its CSRF "
        "check 3.3%, the body's parse 2.6%, the view 3.7%); the SDK's request 12% (openai "
        "building it 3.3%, httpx2's client around the transport 1%, aiohttp's own request "
        "3.6%); the turn's own work besides 14%; the database threads 13%; the event loop's "
        "own passes (epoll, handles, the database threads' wake-ups and their futures) "
        "about 19%; the ASGI layers in front of Django (probes, metrics, request IDs, the "
        "upload guards, static files, the chat's admission) about 4%. Still no part near "
        "the cut a start needs. One part measured by taking it out: asgiref's "
        "sync_to_async replaced, for every call on a lane, by a bare submit to the lane "
        "and a future the thread settles (a patch by hand): a start's instructions "
        "(`python -m bench.instructions --starts`, 3 rounds each) 13,566,879 against "
        "13,079,171, 3.6% less. A crossing of our own would have to mirror asgiref's "
        "thread-locals, context and cancellation for that; not done.",
        "The turn's first step takes the role and the budgets the chat request read "
        "(`chat_context_get`) instead of reading them again (4 December 2026; each "
        "later step and each call still read the role): two trips and two queries fewer"
        " before the first provider request. Measured by hand "
        "(`BENCH_BASELINE_TREE=<the tree before> python -m bench.starts --no-burst "
        "--sequential 60`, before and after interleaved, each on a fresh server, load "
        "0.3 to 0.6): server CPU per `paced-20-20` conversation 65.7/43.8, 52.7/43.6, "
        "49.8/48.7, 52.9/49.7, 46.0/44.8, 50.7/44.7 ms (before/after; medians 51.7 and "
        "44.8); with the burst, three pairs: 55.9/48.1, 38.9/37.1, 55.8/54.6 ms a chat,"
        " first chunk p50 7.48/5.46, 4.59/5.40, 9.55/7.17 s. Every pair is lower after,"
        " by 1 to 22 ms; the round-to-round noise is as large as the change. That "
        "machine ran the same load about 1.5 times slower than on 3 December (44 to 50 "
        "ms a conversation against 30), so these are not to be compared with the table.",
        "The start's reads prepared (roject/server/prepared_queries.py; issue #38, 5 "
        "December 2026): for a small query Django's building and compiling cost about ten "
        "times the query, so the reads every chat message makes (its rojo, the membership "
        "with its project, the role, the budgets, the conversation it continues) are "
        "compiled by the ORM once and run with each call's values. Timed alone (thread CPU, "
        "400 calls each, the bench's world on SQLite): rojo_get 602 -> 58 µs, project_access "
        "381 -> 42 µs, budget_check 211 -> 29 µs, chat_context_get 1,314 -> 144 µs. A chat's "
        "server CPU (`BENCH_BASELINE_TREE=<the tree before> python -m bench.starts --no-burst "
        "--sequential 60 --rounds 4`, load 0.0 to 0.3): 18.1/16.4, 18.3/16.5, 18.4/16.7, "
        "18.3/15.6 ms (before/after). The burst against the tree before this day's three "
        "changes (the database threads, the request's start, these reads; three interleaved "
        "rounds): first chunk p50 1.80/1.42, 1.63/1.43, 1.68/1.44 s, p99 3.35/2.66, "
        "3.08/2.64, 3.17/2.72 s, server CPU a start 17.7/14.2, 16.1/14.2, 16.6/14.5 ms. "
        "Every request about a conversation (its stream, a stop, an approval, an undo) "
        "reads it with its project and rojo the same way: 722 -> 102 µs. "
        "What stays on the ORM: the session's user (Django's auth backend), the inserts (the "
        "conversation, the user's message, the turn's record, the reply and its usage: 160 "
        "to 210 µs each, less than half of it compiling) and the turn's end's updates.",
        "How much the burst's figures move from run to run on one machine (5 December "
        "2026, `make bench` with BENCH_BASELINE_TREE=<the tree before the day's changes>, "
        "two runs within the hour before this one, nothing else running): first chunk p50 "
        "before/after "
        "1.76/1.49 and 2.29/1.99 s, p99 3.52/3.14 and 4.51/3.84 s; the running streams' p99 "
        "66.7/63.6 and 61.5/130.4 ms (and 60.1 and 71.4 ms in two runs without the before "
        "tree); the host's speed moved as much (the burst's server CPU 3.7 and 4.8 s before). "
        "The first chunk is lower after in every pair; the running streams' p99 is not a "
        "figure one run decides: by hand, interleaved, 39 to 84 ms after and 54 to 100 ms "
        "before.",
        "Again on the slower host of 6 December 2026 (a chat 22 to 25 ms of server CPU, "
        "against 16 to 18 the day before), with BENCH_BASELINE_TREE=fc6c335 (the tree before "
        "the review walks' fixes), four `make bench` runs within the hour, first chunk p50 "
        "before/after: 1.79/1.73, 1.71/1.55, 1.31/1.54, 1.49/1.93 s; p99 3.69/3.10, "
        "3.60/2.77, 2.25/2.69, 2.72/3.72 s: one pair does not tell which tree is faster. "
        "Interleaved by hand right after, each tree on a fresh server (`python -m "
        "bench.starts --rounds 3 --sequential 40`): p50 1.93/1.91, 1.88/1.52, 1.82/1.64 s, "
        "p99 3.68/3.45, 3.53/2.95, 3.64/2.94 s, the running streams' p99 56.8/53.6, "
        "51.6/46.6, 51.9/42.7 ms, server CPU a start 25.1/22.6, 22.3/19.9, 24.4/18.9 ms: "
        "the fixes (the chat's place taken only by a known credential, the budgets counted "
        "under the user's lock, a turn's token checked) cost the burst nothing; every pair "
        "is the same or lower after. The same seven trips to the database threads a chat "
        "in both (`--crossings`).",
        "Why the burst's first-chunk targets are still out of reach here (6 December 2026, "
        "with the writes after the starts): the last start's first chunk comes after every "
        "start's work before its first chunk, about 8 ms each on this machine (the p99 less "
        "the chunks streamed meanwhile, over 200), and the median's after half of them; the "
        "targets need about 7 ms (p99) and 6 ms (p50). The loop thread's share of a chat "
        "is two thirds (per-thread CPU over 100 sequential chats: 13.1 of 19.7 ms). Each "
        "trip to the database threads costs about 80 µs of CPU in the handoff itself and "
        "asgiref's sync_to_async 40 µs more (measured alone: 124 against 77 µs a trip "
        "through a lane directly); a start makes three. Earlier figures: a burst of 200 "
        "starts is 200 times a start's CPU on the process's one core for Python, whatever "
        "order they run in, and the running streams' and the burst's own chunks take their "
        "share of it too. At the 14 ms a start of this machine's bursts (5 December 2026, "
        "chunks included) that is 2.8 s, and the median start waits for about half of it; "
        "a first chunk within 1 s (median) and 2 s (p99) needs about 7 and 10 ms a start. "
        "What is left of a chat, by cProfile on every thread over 40 sequential chats "
        "(thread CPU, profiled units; 5 December 2026, after the prepared reads): the "
        "database threads about 40% (the five inserts 16% of all, the turn's end's updates "
        "8%, the session's user 5%, the chat's reads 3%), the event loop's thread 60% (the "
        "turn's task and its stream 26%, of which the SDK's request 8%; Django's request "
        "path, its middlewares and django-ninja 9%; the event loop, uvicorn and the ASGI "
        "wrappers the rest). No one part is the third that is missing. What would get "
        "there is a start that does not go through Django's request handling, the ORM's "
        "inserts and the SDK (the floor's 0.2 s is an aiohttp handler forwarding bytes), or "
        "more processes: both change the fixed design (Django views, the openai SDK) or the "
        "measured layout (one process), so they are left.",
        "Measured on 6 December 2026 (`python -m bench.starts`'s burst by hand, a fresh "
        "server each, interleaved, three rounds, load 0.7 to 1.3, a host slower than the "
        "day before: 19.5 to 21.4 ms of server CPU a start): uvloop (uvicorn's, 0.23.0) "
        "against asyncio, first chunk p50 1.44, 1.73, 1.32 s against 1.70, 1.51, 1.68 s, "
        "p99 2.95, 2.96, 2.65 s against 3.27, 2.89, 3.07 s, the running streams' p99 28, "
        "27, 25 ms against 52, 44, 47 ms, the CPU a start the same (21.5, 20.4, 19.6 ms "
        "against 21.4, 19.5, 21.2): the loop's own work is not what the starts wait for, "
        "and section 14 counts the floor gaining more from uvloop than the app (the per-"
        "chunk ratio 2.26x its own floor), so asyncio stays. The burst as `make bench` runs "
        "it, on the server that has just run the steady and paced streams, against a "
        "fresh server: p50 1.65, 1.71, 1.74 s against 1.51, 1.54, 1.64 s, p99 2.95, 3.24, "
        "3.20 s against 2.97, 2.91, 3.15 s, the collector's pauses the same (69 to 75 ms "
        "a burst): about 7% later, not what holds the targets. On this host the targets "
        "need about a third less CPU a start.",
        "Issue #38, 5 December 2026: the chat's response written by the turn's own task "
        "while the client keeps up (roject/server/direct_writes.py; section 14: 174,966 -> "
        "154,693 instructions a chunk). `python -m bench.per_chunk --rounds 3 --baseline "
        "<the tree before>`, interleaved, right after a CI run (load 5.8 falling to 3.8): "
        "floor 60.4 µs a chunk, before 77.1 µs (1.28x; rounds 78.4, 77.1, 70.4), after "
        "61.9 µs (1.03x; rounds 79.0, 61.9, 61.9): a chunk now takes two passes of the "
        "event loop, as the floor's, not three.",
        "Issue #38, 6 December 2026: the ASGI wrappers of `send` that a streamed chunk "
        "crosses (the chat's admission, the upload guard, the write timeout's) are plain "
        "functions returning the inner send's awaitable, not coroutines: a write that cannot "
        "wait goes to uvicorn's send with no frame of ours on its way. Counted as section 14 "
        "counts (a window of 200 lockstep chunks, the app only, before and after in one "
        "run): 156,589, 155,079, 155,264 before against 155,062, 153,671, 153,354 after "
        "instructions a chunk (medians 155,264 and 153,671: 1.0% fewer; an earlier pair "
        "156,019/156,959 against 153,411/155,016).",
        "Issue #38, 6 December 2026: a turn's heartbeat (every ROJO_TURN_HEARTBEAT_SECONDS, "
        "2 s) is one UPDATE written once (rojos/turns/claims.py: turn_beat_blocking), not "
        "built by Django's filter, update and compiler at every beat. Timed alone on one "
        "thread (thread CPU, 300 beats a run, five runs of each interleaved, load about 10): "
        "314 µs a beat through the ORM (303 to 325) against 82 µs (81 to 91). At 200 "
        "streams of 50 chunks a second the process beats 100 times a second for 10,000 "
        "chunks: about 2.3 µs less a chunk, some 3% of the app's steady figure, below what "
        "one run of it can show; a paced conversation's five beats, 1.2 ms of its CPU.",
        "Then the beats of every turn running on the process together (rojos/turns/"
        "claims.py: one task per event loop, one UPDATE for all their claims every 2 s, and "
        "a read only when one was taken over): for 200 turns, thread CPU, five runs "
        "interleaved, 57.4 ms through the ORM one by one (52.9 to 63.0; plus 200 trips to "
        "the database threads at about 140 µs of process CPU each, 28 ms) against 1.35 ms "
        "(1.21 to 1.65) and one trip. At 200 streams that is about 4.3 µs a chunk before "
        "either change, 2.2 µs with the UPDATE written once, under 0.1 µs now.",
        "Tried and left, the same day (`python -m bench.starts --sequential 10`, two rounds "
        "each, interleaved, load 2 to 3): the GIL's switch interval at 1 ms instead of "
        "Python's 5 ms, so that the event loop's thread waits less behind a database "
        "thread's ORM work during the burst: the running streams' p99 was 164 and 120 ms "
        "against 94 and 90 ms at 5 ms, first chunk p50 2.10 and 1.93 s against 1.67 and "
        "2.15 s: worse, the switches cost more than the waits they cut.",
        "A start's own work cut, 6 December 2026 (the fourteenth session; `python -m "
        "bench.instructions --starts`, callgrind, request to first chunk, three rounds each, "
        "the tree before and after side by side, so the host's load does not count): 16,164,098"
        " instructions before (8b4854d) against 14,589,115 after, 9.7% less. The provider "
        "request's body encoded by orjson and handed to the SDK's post as bytes (its json.dumps"
        " took 525 µs of a 58 KB body, orjson 30 µs): 0.53 M instructions; the three rows a "
        "chat stores as it starts (the conversation, the user's message, the turn's record) "
        "inserted by a statement Django compiles once per database "
        "(roject/server/prepared_inserts.py; the turn's begin 1,987 -> 1,368 µs of thread CPU, "
        "the same five queries): 1.27 M. Where the rest goes (a profile of the same day): about"
        " half on the event loop (Django's request path with django-ninja's auth and CSRF a "
        "fifth of it, the SDK's request through httpx and aiohttp another fifth) and half on "
        "the database threads (the session's user 2.3 M: Django's ModelBackend.get_user, which "
        "a prepared read would cut to a fifth, but only by copying Django's session check or "
        "changing the backend every stored session names; the turn's begin 3.6 M; the chat's "
        "checks 0.85 M). That day's run's burst (first chunk p50 2.32 s) moved with the host, "
        "not the tree: a start took 24 to 30 ms of server CPU in it, against 18 to 25 ms in the "
        "run before.",
        "Issue #38, 7 December 2026 (the eighteenth session): the session's user read by a "
        "query compiled once (roject/identity/backends.py: PreparedModelBackend, first in "
        "AUTHENTICATION_BACKENDS; Django's get_user keeps every check around it, and Django's "
        "ModelBackend stays listed for the sessions stored naming it). `python -m "
        "bench.instructions --starts --rounds 3`, the tree before and after, two runs each: "
        "14,658,631 and 14,714,621 instructions a start before against 13,865,150 and "
        "13,782,151 after (medians; 0.86 M, 5.8% less, not the fifth of 2.3 M the note above "
        "hoped for: the session's load and its hash stay). get_user alone (thread CPU, 300 "
        "calls, five rounds, at a load of 3): 626 to 820 µs with its session's load before, "
        "216 to 241 µs after.",
        "Issue #38, 7 December 2026 (the twentieth session): a turn's end written by "
        "statements compiled once, as its start's are: the reply's message and its usage "
        "record by PreparedInsert, the turn's record, the claim's release and its pending "
        "approvals by PreparedQuery.update and .delete (roject/server/prepared_queries.py). "
        "Found by cProfile on the database threads over 237 sequential chats (`python -m "
        "bench.starts --no-burst`): the end's three trips were about half of those threads' "
        "time, the turn's end 26% (its two UPDATEs and the DELETE built and compiled by the "
        "ORM each time), the reply's insert 13% (`Message.objects.create`: the user's message "
        "was prepared, the reply's was not) and the usage's 9%. `python -m bench.instructions "
        "--rounds 3`, the tree before and after, two runs each: a turn's start and end "
        "22,501,353 and 22,824,190 instructions before against 21,005,855 and 20,302,853 after "
        "(1.5 to 2.5 M, 7 to 11% less); a chat's start the same (13.55 M), the chunks the "
        "same (154,084 and 154,018). The burst by hand, the two trees interleaved on fresh "
        "servers (`python -m bench.starts --rounds 3 --tree after=<this tree> --tree "
        "before=<the tree before>`, load 0.5 to 1.5): first chunk p50 0.89, 0.94, 1.04 s "
        "(after) against 0.63, 1.16, 1.22 s (before), p99 1.56, 1.75, 1.88 s against 1.40, "
        "2.21, 2.37 s, server CPU a start 10.0, 11.3, 11.7 ms against 10.2, 14.5, 15.6 ms (this"
        " tree again, third in each round: p50 1.03, 1.10, 1.13 s, 11.9, 11.8, 13.3 ms); each "
        "round slower than the one before (the world's tables grow by 200 chats a burst), and "
        "the spread within a round as large as the change: on this host both trees meet the "
        "burst's targets in some rounds and miss them in others.",
        "What holds `cpu_per_paced_conversation_vs_floor` (issue #38's 1.3x): a paced "
        "conversation of 500 chunks is its start and end plus 500 chunks. The chunks now "
        "cost about the floor's (above); the start and end do not: section 14 counts "
        "34 M instructions for a turn's start and end against the floor's 1.8 M (the "
        "request's checks, the claim, the history, the SDK's request, the stored reply, "
        "usage and the turn's record, on the database threads), worth about 200 chunks. "
        "The burst's targets wait on the same cost (the note on the burst above).",
        "On the machine of 5 December 2026 both ratios sit over their targets, before "
        "that day's changes as after them: its floor relays a chunk in about 51 µs (65.5 "
        "in the last run that met both, 1.15x and 1.12x). Measured right after a `make "
        "bench` there, each tree on a fresh server: per chunk (`python -m bench.per_chunk "
        "--rounds 3 --baseline <the tree before>`) floor 51.5 µs, before 69.8 µs (1.36x), "
        "after 65.8 µs (1.28x); a paced conversation, two rounds, 142.7/140.3 and "
        "159.9/149.1 ms (before/after). The day's changes took nothing from either; what "
        "holds them is the paced note above and the per-chunk note at the top.",
        "On the host of 6 December 2026 (the review walks' day) `make bench` gave the "
        "paced ratio 1.30x and 1.51x in two runs six minutes apart, against 1.17x on the host "
        "before, and the floor's paced conversation moved as much (185 to 205 ms). Measured "
        "by hand right after, interleaved on fresh servers (the floor, the tree "
        "before the walks (fc6c335), this one; a paced conversation each, three rounds, the "
        "first warming up): floor 182.9 and 185.1 ms, before 231.3 and 255.1 ms, after "
        "228.5 and 250.6 ms (1.25x and 1.35x): the walks' changes cost a paced conversation "
        "nothing; the ratio moves with the host around its target.",
        "On the host of 7 December 2026 (the twentieth session), faster than the days before "
        "(section 1's reference 50 ms a conversation, against 78 the day before), `make "
        "bench` with BENCH_BASELINE_TREE=8555729 (the tree before the session's changes) gave "
        "the paced ratio 1.53x (app 213 ms, floor 139 ms), the floor's paced conversation 31% "
        "cheaper than the day before (200 ms) and the app's 13% (246 ms). By hand right after "
        "(the floor, the tree before, this one, each on a fresh server, a paced conversation "
        "twice each, three rounds): floor 130.3, 127.1, 133.9 ms; before 303.2, 272.4, 251.3 "
        "ms; after 279.5, 216.0, 227.0 ms, lower in each round. Counted (section 14, the same "
        "lockstep for both), a lone chunk is 155 k instructions in the app against 95 k in "
        "the floor, 1.64x, the same as the days before: where the kernel's share of a chunk "
        "(the wake-up, the read and the write, about the same for both) is smaller, the ratio "
        "of CPU time comes nearer that of the instructions, and a paced conversation's 1.3x "
        "needs a lone chunk's path shorter, not the starts and ends (the note above). The 200 "
        "streams' chunks, which come several to a read, stay under theirs (1.09x). The same "
        "run's burst: first chunk p50 1.15 s before and after, p99 2.09 and 2.11 s, server CPU"
        " 2.9 and 2.7 s for the burst, the running streams' p99 32.7 and 36.1 ms. Two more runs "
        "within the hour: 1.52x (app 216 ms, floor 142 ms) and, on the session's last tree, "
        "1.80x (app 155 ms, floor 85.9 ms): the floor's paced conversation moved 40% between "
        "runs, the app's 28%, the ratio with it.",
        "Issue #38, 7 December 2026 (the twenty-first session): a paced conversation is "
        "mostly wake-ups (500 chunks 20 ms apart, each waking the server on a core that "
        "idled meanwhile), and the app woke for more than its chunks. On this day's host a "
        "bare asyncio loop sleeping 0.1 s at a time used 10.7 ms of CPU in 5 s (`perf "
        "stat`): about 0.2 ms a wake-up; the idle app server 8.1 ms in 5 s, the floor "
        "nothing measurable. Three cuts: uvicorn's main loop ticked ten times a second (the "
        "Date header, a look for a signal); `manage.py serve` and the bench now run "
        "roject/server/exit_wake.py, whose loop wakes once a second and at once for its exit "
        "(the idle server's main thread: 30 wake-ups in 3 s before, 3 after; tests/server/"
        "test_exit_wake.py). malloc_trim ran every second while any turn ran; now a second "
        "after turns start or end (rojos/turns/memory_trim.py): the trimming thread's CPU "
        "in a paced conversation 1.5 to 2.1 ms before, 0.3 to 0.7 after, and about 150 "
        "fewer page faults (the trimmed pages faulted back in). The heartbeat of up to 16 "
        "turns is compiled once for their count: five beats of a lone turn, 4.9 ms of a "
        "database thread's CPU before, 3.0 and 3.5 after; a beat after the thread slept 2 s "
        "cost 1.0 to 4.5 ms alone (the same UPDATE warm: 45 µs), so a trip after idling "
        "costs the thread far more than its work. Context switches of the server in a paced "
        "conversation (`perf stat`, three rounds): 1,041, 1,054 and 1,019 before, 889, 933 "
        "and 887 after (the floor: 757, 758, 754). In CPU time the change is under the "
        "host's noise: the floor's paced conversation moved between 85 and 192 ms within "
        "ten minutes, the two trees' rounds overlap (before 119 to 222 ms, after 129 to "
        "237 ms, eight rounds each). So the app and the floor now take turns, a paced "
        "conversation each, three times (bench/starts.py: paced_pair), where each had its "
        "two in its own minute.",
        "Issue #38, 7 December 2026 (the twenty-third session): the provider's request "
        "without the SDK's X-Stainless-* headers (rojos/provider/clients.py: the server's "
        "OS, CPU, Python and SDK versions and its retries, nine of the request's thirteen "
        "headers, each built, normalised and decoded by the SDK, httpx2 and aiohttp in every "
        "request; found by `python -m bench.instructions --starts --calls`, where httpx2's "
        "Headers.encoding ran 107 times a start). `python -m bench.instructions`, the tree "
        "before and after on the same host: a chat's start 13,566,874 against 13,094,792 "
        "instructions (rounds 13.69, 13.50, 13.57 M against 13.23, 13.05, 13.09 M; 3.5% "
        "less), a turn's start and end 20.88 against 20.27 M, a chunk the same (154,039 and "
        "153,872). The burst by hand, the two trees interleaved on fresh servers (`python -m "
        "bench.starts --rounds 3 --sequential 30 --tree before=<the tree before>`, load 1.2 "
        "to 1.9): server CPU a sequential chat 27.0, 27.2, 28.4 ms before against 25.8, "
        "26.7, 27.1 ms after, lower in each pair; first chunk p50 2.26, 1.79, 2.80 s against "
        "2.38, 2.33, 2.40 s, within the burst's spread on this host (its CPU a start 22 to "
        "33 ms, against 10 to 12 ms on the twentieth session's host). The same day, "
        "Django's message storage made lazy (roject/server/message_storage.py: the cookie's "
        "signer was built for every request): 10 µs a request before, 1 µs after (timed "
        "alone), under what a start's count can show.",
        "Issue #38, 7 December 2026 (the twenty-fourth session): the paced figure measured "
        "with the app and the floor streaming at the same time (bench/starts.py: "
        "paced_pair), not taking turns. By hand, eight rounds on one pair of servers, each "
        "round a pair taking turns then a pair together: taking turns, the floor 142 to "
        "200 ms and the ratio 1.31, 1.35, 1.34, 1.28, 1.41, 1.24, 1.25, 1.20 (median "
        "1.30); together, the floor 140 to 183 ms and the ratio 1.27, 1.29, 1.27, 1.26, "
        "1.23, 1.26, 1.25, 1.26 (median 1.26). A wake-up's cost moves with the host from "
        "one ten-second conversation to the next, and taking turns the two met different "
        "hosts; together they meet the same one, and the ratio's spread fell from 0.21 to "
        "0.06. It also runs lower, by about 0.04, probably because with both streaming the "
        "cores idle less between chunks, and the app, which wakes more often (below), "
        "gains more from that: the figure is the same work measured on a busier machine, "
        "not a cheaper app. Five pairs now, the one of median ratio reported: 50 s of the "
        "bench where three turns each took 60.",
        "Where a paced conversation's CPU goes beyond the floor's (the same day, by hand: "
        "each thread's CPU from /proc's schedstat and its context switches, four rounds): "
        "the event loop's thread 182 to 213 ms against the floor's one thread at 115 to "
        "168 ms in the same rounds, 520 to 577 voluntary switches against 504 (one a "
        "chunk); the three database threads 7 to 17 ms in all, about 10 to 20 wake-ups "
        "each. With the heartbeat and the drafts turned off (ROJO_TURN_HEARTBEAT_SECONDS "
        "and ROJO_DRAFT_SECONDS at an hour) the database threads took 5 to 7 ms and the "
        "loop's thread about 15 switches fewer: the five beats and two drafts of a "
        "ten-second reply cost some 5 to 10 ms of its 200, mostly as wake-ups (the same "
        "UPDATE on SQLite, timed alone on this host, 100 µs right after other work, 300 to "
        "400 µs after a sleep of 0.5 or 2 s). Both are what keeps a reply safe across a "
        "crash (its claim, its text), and stay.",
        "Measured and left, the same day: asgiref's crossing replaced by a bare submit to "
        "the lane (3.6% of a start's instructions, the twenty-second session) would not "
        "keep what asgiref 3.13 does on each call: it moves the caller's `Local` storage "
        "(Django's active translation, URLconf and script prefix are such `Local`s) onto "
        "the database thread, where a call that translates or reverses a URL reads it, and "
        "back. A crossing that did the same would spend most of what it saves.",
        "Issue #38, 7 December 2026 (the twenty-fourth session): the chat completions URL "
        "merged with the rojo's base URL once per SDK client (rojos/provider/clients.py: "
        "completions_url, by the SDK's own rule), where the SDK parsed the path and merged "
        "it in every request. `python -m bench.instructions --starts`, the tree before and "
        "after on the same host: a chat's start 13,155,849 against 12,959,586 instructions "
        "(rounds 13.16, 13.20, 13.16 M against 12.96, 12.98, 12.94 M; 1.5% less). The burst "
        "by hand, both trees interleaved on fresh servers (`python -m bench.starts --rounds "
        "3 --sequential 30 --tree before=<the tree before>`, load 0.8 to 1.2): first chunk "
        "p50 1.79, 1.63, 1.29 s before against 1.44, 1.48, 1.41 s after, server CPU a start "
        "in the burst 19.5, 19.0, 15.2 ms against 16.3, 18.1, 17.7 ms: the burst's own "
        "spread, larger than the change.",
        "`make bench` on this host (the Python yardstick 69 to 72 ms, against 163 to 183 ms "
        "on the two hosts before), the tree before completions_url, three runs within 15 "
        "minutes: the first, begun at a load of 4.3 right after the test suite, missed 7 "
        "targets (first chunk p50 2.18 s and p99 3.99 s, the paced ratio 1.30x: 257 against "
        "197 ms); on the quiet machine, the second met every target of issue #38 (first "
        "chunk p50 0.99 s, p99 1.95 s, the running streams' p99 34.3 ms, the paced ratio "
        "1.29x, per chunk 1.15x) and the third all but the first chunk's p50 (1.06 s; p99 "
        "1.93 s, running 30.6 ms, paced 1.27x, per chunk 1.16x). So on this host the burst's "
        "targets are met or missed by a few percent from run to run. The run of this report, "
        "on the tree with completions_url, 10 minutes later at a load of 0.6: p50 1.27 s, "
        "p99 2.40 s, running 36.7 ms, paced 1.27x. A start about a fifth cheaper would hold "
        "them on this host, and on the slower hosts a start three times cheaper (the notes "
        "above).",
    ]
    section.notes.append(_sequential_note(app, floor.sequential_cpu_ms))
    section.add(
        "floor_first_chunk",
        f"p50 {floor.burst.first_p50 / 1000:.2f} s, p99 {floor.burst.first_p99 / 1000:.2f} s",
        note=f"running streams' p99 during the burst {floor.burst.during_p99:.1f} ms",
    )
    return section


def _sequential_note(app: dict, floor_ms: float) -> str:
    """What the app's sequential story costs beyond the floor, from this run's figures."""
    reader, loop, server = app["reader_cpu_ms"], app["loop_cpu_ms"], app["sequential_cpu_ms"]
    return (
        "What holds `cpu_per_conversation_sequential_vs_floor` when it misses (1.83x to 3.79x "
        "in the runs of 4 December 2026, the floor's own figure moving between 32 and 55 ms; "
        "target 3x), "
        f"from this run's figures: the story's 3 responses read through the SDK and the "
        f"project's stream reader alone, in process, cost {reader:.0f} ms "
        f"({reader / floor_ms:.1f}x the floor) before the loop does anything: the floor "
        "forwards the provider's bytes, the app parses each of the 470 chunks, which the "
        "loop needs to run the tools and store the reply (section 1's profile). The loop's "
        f"own work, the tools, undo snapshots and 16 trips to the database threads, is "
        f"{loop - reader:.0f} ms (section 1's loop minus its reader); the web layer (the "
        "request's session, CSRF and access checks, the turn's claim and record, SSE "
        f"encoding, the server) {server - loop:.0f} ms (the server's share of section 1's "
        "http minus its loop). The 3x leaves the loop and the web layer together about "
        f"{3 * floor_ms - reader:.0f} ms here."
    )


def app_figures(loop: dict, concurrency: list, latencies: list) -> dict:
    """The app's figures the ratios need, from sections 1 to 3's results."""
    many = latencies[-1]
    at_200 = next((r for r in concurrency if r.conversations == 200), concurrency[0])
    return {
        "sequential_cpu_ms": median(loop["instant"].server_ms),
        "reader_cpu_ms": loop["instant"].median_ms("reader"),
        "loop_cpu_ms": loop["instant"].median_ms("loop"),
        "concurrent_cpu_ms": at_200.server_cpu_s * 1000 / at_200.conversations,
        # Replaced by the steady state's (bench/steady.py) once section 10 measured it.
        "per_chunk_us": many.server_cpu_s * 1e6 / max(len(many.samples_ms), 1),
        "per_chunk_with_starts_us": many.server_cpu_s * 1e6 / max(len(many.samples_ms), 1),
        "per_stream_kib": at_200.per_stream_kib,
        "paced_cpu_ms": float("nan"),  # section 10 measures it
        "bursts": {},
    }
