"""The rojos' figures for /metrics (roject/server/metrics.py): turns, provider answers, tool
calls, approvals, tokens and cost, retries.

Counted once per turn, request, call or retry, never per streamed chunk: the hot path
(docs/performance.md) pays nothing for them. Labels are bounded sets (outcomes, error kinds,
tool names), never a user, a project or a message.
"""

from prometheus_client import Counter, Gauge, Histogram

# Seconds buckets from a fast local model's first chunk to a slow reasoning model's.
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120)

turns_started = Counter("rojo_turns_started", "Turns started.")
turns_running = Gauge("rojo_turns_running", "Turns running in this process.")
turns_ended = Counter("rojo_turns_ended", "Turns ended, by outcome.", ["outcome"])
first_chunk_seconds = Histogram(
    "rojo_provider_first_chunk_seconds",
    "From a request to the provider to its first streamed chunk.",
    buckets=LATENCY_BUCKETS,
)
first_event_seconds = Histogram(
    "rojo_turn_first_event_seconds",
    "From a turn's start to its first event after START.",
    buckets=LATENCY_BUCKETS,
)
provider_errors = Counter("rojo_provider_errors", "Provider failures, by kind.", ["kind"])
tool_calls = Counter("rojo_tool_calls", "Tool calls, by tool and outcome.", ["tool", "outcome"])
approvals_waiting = Gauge("rojo_approvals_waiting", "Tool calls waiting for a person.")
tokens = Counter("rojo_tokens", "Tokens the providers counted, by direction.", ["direction"])
cost = Counter("rojo_cost_dollars", "What the providers' answers cost, as priced.")
retries = Counter(
    "rojo_retries", "Retries of a write or a relay after an outage, by service.", ["service"]
)
