"""The services the server cannot work without, and what a person is told when one is down.

One table for the API's 503 (rojos.web.errors) and for the record of a turn that could not
start for that reason (rojos.turns.start): the chat's answer and what its conversation shows
afterwards say the same thing.
"""

from django.db import OperationalError
from redis.exceptions import RedisError

from roject.identity.sessions import SessionNotEnded

# What a channel layer's client raises when the layer (Redis) is out of reach.
LAYER_ERRORS = (OSError, RedisError)

# The code a turn record or an event carries when a service it needs is out of reach.
UNAVAILABLE_CODE = "unavailable"

# By the error a client of each service raises.
UNAVAILABLE: dict[type[Exception], str] = {
    RedisError: "The server cannot reach its message relay; try again in a moment.",
    OperationalError: "The database is busy or unreachable; try again in a moment.",
    # A session to end (its user's password changed) while its cache is out of reach.
    SessionNotEnded: "The session store cannot be reached; try again in a moment.",
}


def outage_message(exc: BaseException) -> str | None:
    """What a person is told when `exc` says a service is out of reach; None otherwise."""
    for error, message in UNAVAILABLE.items():
        if isinstance(exc, error):
            return message
    return None
