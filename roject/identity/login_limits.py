"""Failed logins, limited per username and per client address, in the cache every server
process shares (Redis when REDIS_URL is set, see settings.CACHES).

An attempt is counted before its password is checked and given back when the password was
right, so parallel guesses cannot slip past the limit between a check and a count: of any
number sent at once, at most the limit are checked. A window of ROJO_LOGIN_LOCKOUT_SECONDS
opens with the first attempt counted; once a username or an address has used up its
failures in it, every login with that username or from that address is refused until the
window ends, the right password included.
Usernames that do not exist are counted like the others, so a refusal tells nothing of
which accounts exist.
"""

import contextlib
import hashlib
import ipaddress
import math
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest
from redis.exceptions import RedisError


class LoginLocked(Exception):
    """Too many failed logins for this username or from this address, for now."""

    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after
        super().__init__(
            "Too many failed logins for this username or from your network. "
            f"Try again in {_duration(retry_after)}."
        )


class LoginLimitsUnavailable(Exception):
    """The cache that holds the counts cannot be reached: no login is checked without them."""

    retry_after = 5

    def __init__(self) -> None:
        super().__init__("The server cannot check logins right now. Try again in a moment.")


@dataclass(frozen=True, slots=True)
class LoginAttempt:
    """An attempt counted against its username and address, until its password proves right."""

    user_key: str = ""
    address_key: str = ""

    def succeeded(self) -> None:
        """The password was right: the username's failures and window are forgiven, and this
        attempt is no failure of the address."""
        # Should the cache fail now, the counts err on the strict side; the login is sound.
        with contextlib.suppress(RedisError, OSError):
            if self.user_key:
                cache.delete_many([self.user_key, _since_key(self.user_key.rpartition(":")[0])])
            _give_back(self.address_key)


def login_attempt_start(*, request: HttpRequest | None, username: str) -> LoginAttempt:
    """Count an attempt to log in as `username` before its password is checked.

    Raises LoginLocked while the username or the client's address is over its limit (the
    attempt is then not counted), LoginLimitsUnavailable when the cache cannot be reached.
    """
    address = client_address(request) if request is not None else ""
    scopes = {
        "user_key": ("user", username.strip().casefold(), settings.ROJO_LOGIN_USER_FAILURES),
        "address_key": ("address", address, settings.ROJO_LOGIN_ADDRESS_FAILURES),
    }
    window = max(1, int(settings.ROJO_LOGIN_LOCKOUT_SECONDS))
    claimed: dict[str, str] = {}
    try:
        for field, (scope, value, limit) in scopes.items():
            if limit <= 0 or not value:  # this limit is off, or there is no address
                continue
            claimed[field], count, ends = _claim(_key(scope, value), window)
            if count > limit:
                for key in claimed.values():
                    _give_back(key)
                raise LoginLocked(max(1, math.ceil(ends - time.time())))
    except (RedisError, OSError) as exc:
        raise LoginLimitsUnavailable from exc
    return LoginAttempt(**claimed)


def client_address(request: HttpRequest) -> str:
    """The client's address, as the limits count it: behind ROJO_PROXY_COUNT reverse proxies
    that each append to X-Forwarded-For, the entry the outermost one added (the entries
    before it are the client's own word); an IPv6 address counts as its /64 network, which
    one client can have whole."""
    address = _forwarded_address(request)
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:  # ::ffff:a.b.c.d is the IPv4 client a.b.c.d
            return str(parsed.ipv4_mapped)
        return str(ipaddress.ip_network(f"{parsed}/64", strict=False))
    return str(parsed)


def client_ip(request: HttpRequest) -> str | None:
    """The client's own address, found as `client_address` finds it but not widened to a
    network (what the audit log records); None when it is no IP address."""
    try:
        parsed = ipaddress.ip_address(_forwarded_address(request))
    except ValueError:
        return None
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return str(parsed.ipv4_mapped)
    return str(parsed)


def _forwarded_address(request: HttpRequest) -> str:
    address = request.META.get("REMOTE_ADDR", "")
    proxies = settings.ROJO_PROXY_COUNT
    if proxies > 0:
        forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
        if len(forwarded) >= proxies and forwarded[-proxies]:
            address = forwarded[-proxies]
    return address


def _key(scope: str, value: str) -> str:
    return f"login-failures:{scope}:{hashlib.sha256(value.encode()).hexdigest()[:32]}"


def _claim(base: str, window: int) -> tuple[str, int, float]:
    """Count one attempt in the window of `base`; (its counter's key, the count, when the
    window ends). The window's start names its counter, so both expire together."""
    for _ in range(3):
        since = cache.get_or_set(_since_key(base), time.time(), window)
        ends = since + window
        key = f"{base}:{int(since * 1000)}"
        cache.add(key, 0, timeout=math.ceil(ends - time.time()) + 1)
        try:
            return key, cache.incr(key), ends
        except ValueError:  # the window ended between the two calls: start the next one
            continue
    raise OSError("the cache loses the login counts as soon as they are written")


def _since_key(base: str) -> str:
    return f"{base}:since"


def _give_back(key: str) -> None:
    if key:
        with contextlib.suppress(ValueError):  # its window has ended meanwhile
            cache.decr(key)


def _duration(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds} second{'s' * (seconds != 1)}"
    minutes = math.ceil(seconds / 60)
    return f"{minutes} minute{'s' * (minutes != 1)}"
