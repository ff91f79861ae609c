"""Where a connection the portal makes for a user (a webhook) may go: public addresses only, by one rule.

The rule is checked twice: when a URL is saved or submitted (`url_problem`: a clear 400 at once, not a failed
delivery an hour later), and by the sender each time it connects (notifications/webhook.py), since a name can
resolve elsewhere between the two. The first check waits at most SAVE_CHECK_SECONDS for the name to resolve, in a
small pool of its own, so a slow resolver never holds a web worker: a name that does not resolve in time passes
it and is judged by the sender.
"""

from __future__ import annotations

import ipaddress
import socket
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as WaitedTooLong
from urllib.parse import urlsplit

SAVE_CHECK_SECONDS = 2.0
# Lookups of the save-time check: a few per process; a hung one holds one thread of this pool, never a request.
_LOOKUPS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="address-check")

# IPv6 forms that carry an IPv4 address in their low 32 bits: IPv4-compatible (::a.b.c.d, deprecated),
# IPv4-translated (::ffff:0:a.b.c.d, SIIT) and the well-known NAT64 prefix (RFC 6052). A host or
# gateway that speaks them reaches that IPv4 address.
_LOW_32_BITS_CARRY_IPV4 = tuple(ipaddress.IPv6Network(n) for n in ("::/96", "::ffff:0:0:0/96", "64:ff9b::/96"))
# Not global, though Python before 3.12 says they are: local-use NAT64 (RFC 8215: its IPv4 address may
# sit at several places) and site-local.
_PRIVATE_V6 = tuple(ipaddress.IPv6Network(n) for n in ("64:ff9b:1::/48", "fec0::/10"))


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address stands for: mapped, compatible, NAT64, 6to4, Teredo; [] if none."""
    if ip.ipv4_mapped:
        return [ip.ipv4_mapped]
    if ip.sixtofour:
        return [ip.sixtofour]
    if ip.teredo:
        return list(ip.teredo)  # the relay server and the client's own address
    if _in(ip, _LOW_32_BITS_CARRY_IPV4):
        return [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)]
    return []


def allowed(address: str, allow_private: bool) -> bool:
    """May the portal connect to this IP address (text, as getaddrinfo gives it)?"""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    # Decide on where the packets really go: an IPv6 form of 127.0.0.1 is 127.0.0.1.
    embedded = embedded_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) else []
    targets: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [*embedded] or [ip]
    if any(target.is_unspecified or target.is_multicast for target in targets):
        return False
    return allow_private or all(target.is_global and not _in(target, _PRIVATE_V6) for target in targets)


def _in(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, networks: tuple[ipaddress.IPv6Network, ...]) -> bool:
    return any(ip in network for network in networks)


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (OSError or UnicodeError when it does not)."""
    return [str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


def refusal(host: str, addresses: list[str], allow_private: bool) -> str:
    """The one sentence for a host that resolves to an address the rule refuses (or to none)."""
    refused = next((a for a in addresses if not allowed(a, allow_private)), "nothing")
    if refused == host:
        return f"{host} is not a public address"
    return f"{host} resolves to {refused}, which is not a public address"


def url_problem(url: str, allow_private: bool, wait: float = SAVE_CHECK_SECONDS) -> str | None:
    """What is wrong with where an http(s) URL (its form already checked) points, or None: a refused address
    found now; a name that does not resolve within `wait` s (or at all) is left to the sender's own check."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = _LOOKUPS.submit(resolve, host, port).result(timeout=wait)
    except (WaitedTooLong, OSError, UnicodeError):
        return None
    if all(allowed(address, allow_private) for address in addresses):
        return None
    return refusal(host, addresses, allow_private) + ": the portal sends webhooks to public addresses only"
