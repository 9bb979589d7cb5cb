"""Where Rojo's requests for an HTTP MCP server may go: its own host, and other hosts only on
public addresses unless an admin allowed them.

An admin who adds a server trusts its host, not every host its OAuth metadata names: the
protected resource metadata names the authorization server, whose metadata names the token
and registration endpoints, and Rojo requests them itself (discovery, registration, the
token exchange, every refresh). Metadata naming 169.254.169.254, 127.0.0.1:6379 or a 10.x
host would make Rojo a server-side request forgery for whoever writes it. So:

- **The server's own host** (the host of its URL, as the admin wrote it, any port) may be
  anything: admins run servers on loopback and internal networks, and what else listens
  on that host is the server operator's own. So is a host named in
  `ROJO_MCP_OAUTH_INTERNAL_ALLOWED`.
- **Any other host** is resolved by Rojo, and each address it resolves to must be public
  (`address_internal`) or inside a network listed in `ROJO_MCP_OAUTH_INTERNAL_ALLOWED`.
  One internal address is enough to refuse: a name with a public and a private address
  would otherwise pass its check and reach the private one.
- **The connection goes to the address checked**, not to the name resolved again, so a name
  that answers a public address to the check and a private one to the connection (DNS
  rebinding) reaches only the first. TLS still verifies the certificate for the name.
- **Every connection is checked**, so a redirect is too (the SDK follows one only within
  the request's origin, and never for Rojo's token exchange). A refusal happens before a
  byte is written: no token, code or client secret reaches the refused host.

A proxy from the environment (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY`, as
every HTTP client of Rojo takes them) is used as before: a server reached only through an
egress proxy stays reachable. The proxy resolves the names itself, so there the check is
made on Rojo's own resolution just before each request: a name Rojo resolves to an internal
address is refused all the same, but one only the proxy can resolve, or that resolves
differently there, is the proxy's to refuse.
"""

import ipaddress
import logging
import socket
from collections.abc import Iterable
from dataclasses import dataclass

import anyio
import httpcore2
import httpx2
from django.conf import settings
from httpx2._utils import get_environment_proxies  # as httpx2 reads them for its clients

logger = logging.getLogger("rojos.mcp")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

SETTING = "ROJO_MCP_OAUTH_INTERNAL_ALLOWED"
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# Why a sign-in stopped, for the person (a member, or the model in a turn): the log names
# the host, which is the admin's business.
REFUSED = (
    "its sign-in names a host on an internal network, which Rojo does not reach unless an "
    f"admin allows it ({SETTING})"
)


class DestinationRefused(Exception):
    """A request for an MCP server would have gone to an internal address nobody allowed;
    the message names the host, for the log (the person is told without it)."""


# The special-purpose networks that are not globally reachable (IANA's IPv4 and IPv6
# special-purpose address registries, RFC 6890), named here rather than left to the
# interpreter's tables: Python before 3.11.10 called 192.0.0.0/24 and 192.88.99.0/24 global
# (CVE-2024-4032), so 192.0.0.192, a cloud's metadata address, passed as an outside host.
_SPECIAL = tuple(
    ipaddress.ip_network(network)
    for network in (
        "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
        "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
        "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
        "::/128", "::1/128", "64:ff9b:1::/48", "100::/64", "2001::/23", "2001:db8::/32",
        "3fff::/20", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
    )
)  # fmt: skip


def address_internal(address: IPAddress) -> bool:
    """Whether `address` is one a request from outside should not make Rojo reach: loopback,
    private, link-local, unique-local, site-local, shared (100.64/10), unspecified, multicast
    or reserved; an IPv4 address inside an IPv6 one (mapped, 6to4, NAT64) is judged as
    itself."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and address in _NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            return address_internal(embedded)
        if address.is_site_local:
            return True
    return (
        any(address in network for network in _SPECIAL if network.version == address.version)
        or not address.is_global
        or address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    )


async def addresses_of(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to, in the resolver's order (an address: itself)."""
    answers = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in answers:
        address = ipaddress.ip_address(str(sockaddr[0]).partition("%")[0])
        if address not in found:
            found.append(address)
    return found


def _host(url: str) -> str:
    """A URL's host as httpcore2 connects to it: IDNA-encoded, lower case, no brackets."""
    try:
        return httpx2.URL(url).raw_host.decode("ascii").lower()
    except (httpx2.InvalidURL, UnicodeError):
        return ""


@dataclass(frozen=True, slots=True)
class Destinations:
    """Where the requests for one MCP server may go (see the module's docstring)."""

    server_host: str
    allowed_hosts: frozenset[str] = frozenset()
    allowed_networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def of(cls, server_url: str) -> "Destinations":
        """The rule for the server at `server_url`, with the setting as it is now."""
        hosts, networks = set(), []
        for item in getattr(settings, SETTING):
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                hosts.add(_host(f"http://{item}") or item.lower())
        return cls(_host(server_url), frozenset(hosts), tuple(networks))

    def trusted(self, host: str) -> bool:
        """Whether `host` was named by the admin: the server's own, or in the setting."""
        host = host.lower()
        return host == self.server_host or host in self.allowed_hosts

    def check(self, host: str, port: int, addresses: Iterable[IPAddress]) -> None:
        """Raise `DestinationRefused` unless `host`'s `addresses` may all be reached."""
        internal = [
            address
            for address in addresses
            if address_internal(address)
            and not any(address in network for network in self.allowed_networks)
        ]
        if internal:
            listed = ", ".join(str(address) for address in internal)
            raise DestinationRefused(
                f"{host}:{port} resolves to an internal address ({listed}), neither the MCP "
                f"server's own host nor allowed by {SETTING}"
            )

    async def addresses(self, host: str, port: int) -> list[IPAddress] | None:
        """The addresses a connection to `host` may go to: None for a host the admin named
        (connected to by its name), else every address it resolves to, all checked.

        Raises `DestinationRefused` (logged here, with the server it was for) or the
        resolver's `OSError`.
        """
        if self.trusted(host):
            return None
        addresses = await addresses_of(host, port)
        try:
            self.check(host, port, addresses)
        except DestinationRefused as exc:
            logger.warning("MCP server at %s: refused: %s", self.server_host, exc)
            raise
        return addresses

    async def url_check(self, url: str) -> None:
        """The check a connection to `url` would make, made now (a host that does not
        resolve passes: its connection fails anyway)."""
        parsed = httpx2.URL(url)
        host = parsed.raw_host.decode("ascii").lower()
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            await self.addresses(host, port)
        except OSError:
            return


class CheckedBackend(httpcore2.AsyncNetworkBackend):
    """httpcore2's network backend, connecting to a host the admin did not name only at an
    address `Destinations` allowed: resolved once, checked, connected to as checked."""

    def __init__(self, destinations: Destinations) -> None:
        self.destinations = destinations
        self.inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109  (httpcore2's interface)
        local_address: str | None = None,
        socket_options: Iterable | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                addresses = await self.destinations.addresses(host, port)
        except TimeoutError as exc:
            raise httpcore2.ConnectTimeout(str(exc)) from exc
        except OSError as exc:
            raise httpcore2.ConnectError(str(exc)) from exc
        if addresses is None:
            return await self.inner.connect_tcp(host, port, timeout, local_address, socket_options)
        failed: Exception = httpcore2.ConnectError(f"{host} has no address")
        for address in addresses:
            try:
                return await self.inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                failed = exc
        raise failed

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):  # noqa: ASYNC109
        raise httpcore2.ConnectError("MCP servers are reached over TCP")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class CheckedTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport (its defaults: TLS verified, HTTP/1.1), connecting through
    `CheckedBackend`."""

    def __init__(self, destinations: Destinations) -> None:
        super().__init__()
        # httpx2 takes no network backend of its own; its pool is httpcore2's, which does.
        self._pool._network_backend = CheckedBackend(destinations)


class CheckedProxyTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport through a proxy from the environment, each request's host checked
    first (on Rojo's resolution: the proxy resolves it again, see the module's docstring)."""

    def __init__(self, destinations: Destinations, proxy: str) -> None:
        super().__init__(proxy=proxy)
        self.destinations = destinations

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await self.destinations.url_check(str(request.url))
        return await super().handle_async_request(request)


def checked_client_options(server_url: str) -> dict:
    """The `transport` and `mounts` of every client making requests for the MCP server at
    `server_url`: connections checked, through the environment's proxies where they apply
    (httpx2 reads no proxy from the environment for a client given its own transport)."""
    destinations = Destinations.of(server_url)
    mounts: dict[str, httpx2.AsyncBaseTransport | None] = {
        pattern: None if proxy is None else CheckedProxyTransport(destinations, proxy)
        for pattern, proxy in get_environment_proxies().items()
    }
    return {"transport": CheckedTransport(destinations), "mounts": mounts}
