"""Whether this process is shutting down: set on SIGTERM (roject/server/graceful.py), read by
the turn's start (new turns refused with 503 and Retry-After, so they go to another process)
and by /readyz (503, so a proxy or an orchestrator sends nothing new here)."""

_draining = False


def draining_begin() -> None:
    global _draining
    _draining = True


def draining() -> bool:
    return _draining
