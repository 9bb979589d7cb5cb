"""Errors that end a turn. Their message is shown to the user as is, so it never holds a key."""


class TurnError(Exception):
    """Base: the turn cannot go on; what completed before is kept."""

    code = "error"


class ProviderError(TurnError):
    """The model's provider failed: unreachable, refused the request, or sent a broken stream."""

    code = "provider"


class StepLimitReached(TurnError):
    """The rojo called tools max_steps times without answering."""

    code = "max_steps"


class TurnBusy(TurnError):
    """Another turn is already running in this conversation."""

    code = "busy"


class TurnLimited(TurnError):
    """The user is over a per-user limit (messages per minute, or replies running at once)."""

    code = "limited"
