"""Errors that end a turn. Their message is shown to the user as is, so it never holds a key."""

from roject.errors import AppError


class TurnError(AppError):
    """Base: the turn cannot go on; what completed before is kept."""

    code = "error"


class ProviderError(TurnError):
    """The model's provider failed: unreachable, refused the request, or sent a broken stream."""

    code = "provider"
    # The provider's own words, when it sent an error object mid-stream: a notice quotes
    # them (the loop's late error) rather than our sentence around them.
    said: str | None = None


class StreamBroken(ProviderError):
    """The connection to the provider failed or went silent past its timeout: before its
    answer or mid-stream, not the provider's own error. One that comes after the response's
    finish reason costs nothing of it (its usage at most): the turn goes on."""


class StepLimitReached(TurnError):
    """The rojo called tools max_steps times without answering."""

    code = "max_steps"


class ReplyCutOff(TurnError):
    """The reply reached the model's output limit (finish_reason "length"): what it wrote is
    kept, but it stops mid-sentence, or, for a model that spent the limit thinking, says
    nothing. Told, so nobody takes a cut reply for a whole one."""

    code = "output_limit"


class AccessRevoked(TurnError):
    """The person the turn runs for was removed from its project while it ran."""

    code = "revoked"


class TurnBusy(TurnError):
    """Another turn is already running in this conversation."""

    code = "busy"


class ServerDraining(TurnError):
    """This server process is shutting down (roject/server/graceful.py): the message goes to
    another process, or is sent again in a moment. Raised before anything is stored, so the
    page re-sends it itself on this code (static/rojo/resend.js)."""

    code = "draining"


class TurnLimited(TurnError):
    """The user is over a per-user limit (messages per minute, or replies running at once)."""

    code = "limited"


class TurnNotStarted(TurnError):
    """The user's message is stored, but its turn could not start; the cause is chained.

    It names the conversation the message is in (a new chat made one), so that the client
    can show it there and send the next message to it, not to yet another new conversation.
    """

    code = "internal"

    def __init__(self, message: str, conversation_id: int):
        super().__init__(message)
        self.conversation_id = conversation_id


class TurnUnreachable(TurnError):
    """A Stop or a decision the running turn did not confirm it received (the relay is down
    or restarting): nothing is known delivered, so the client is told to try again."""

    code = "unavailable"


class DatabaseUnreachable(TurnError):
    """The database stayed out of reach for longer than the turn retries its writes."""

    code = "database"


class RojoKeyRefused(ProviderError):
    """The rojo names a key variable the key rule refuses (rojos.models.key_sources): the turn ends
    before any request, so the variable's value is never sent anywhere."""
