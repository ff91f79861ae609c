"""POST a JSON body to a user's webhook: to a public address only, pinned to the address that was checked.

The name is resolved once, every address it gives must be public (unless the operator allows
private ones: PADDLECLOUD_WEBHOOK_ALLOW_PRIVATE), and the connection goes to that checked address
(with the URL's Host and TLS name), so a name that re-resolves to 127.0.0.1 between the check and
the connection (DNS rebinding) reaches nothing new. No redirects, a bounded timeout, a bounded answer.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from typing import Any
from urllib.parse import urlsplit

import certifi
import urllib3


class WebhookRefused(Exception):
    """Never worth retrying: where the URL points is not allowed, or the receiver said no (4xx)."""


class WebhookTransient(Exception):
    """Worth retrying later: no connection, a timeout, a 5xx or 429."""


# IPv6 forms that carry an IPv4 address in their low 32 bits: IPv4-compatible (::a.b.c.d, deprecated)
# and the well-known NAT64 prefix (RFC 6052). A host or gateway that speaks them reaches that IPv4 address.
_LOW_32_BITS_CARRY_IPV4 = (ipaddress.IPv6Network("::/96"), ipaddress.IPv6Network("64:ff9b::/96"))


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address stands for: mapped, compatible, NAT64, 6to4, Teredo; [] if none."""
    if ip.ipv4_mapped:
        return [ip.ipv4_mapped]
    if ip.sixtofour:
        return [ip.sixtofour]
    if ip.teredo:
        return list(ip.teredo)  # the relay server and the client's own address
    if any(ip in network for network in _LOW_32_BITS_CARRY_IPV4):
        return [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)]
    return []


def _allowed(address: str, allow_private: bool) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    # Decide on where the packets really go: an IPv6 form of 127.0.0.1 is 127.0.0.1.
    targets = (embedded_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) else []) or [ip]
    if any(target.is_unspecified or target.is_multicast for target in targets):
        return False
    return allow_private or all(target.is_global for target in targets)


def resolve_checked(host: str, port: int, allow_private: bool) -> str:
    """The one address the POST goes to; WebhookRefused if any address of the name is not allowed."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise WebhookTransient(f"cannot resolve {host}: {exc}") from None
    addresses = [str(info[4][0]) for info in infos]
    refused = [a for a in addresses if not _allowed(a, allow_private)]
    if refused or not addresses:
        where = refused[0] if refused else "nothing"
        raise WebhookRefused(f"{host} resolves to {where}, which is not a public address")
    return addresses[0]


def post_json(url: str, body: dict[str, Any], *, timeout: float, allow_private: bool) -> int:
    """POST `body` to `url`; the status code of a 2xx answer, else WebhookRefused or WebhookTransient."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = resolve_checked(host, port, allow_private)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = {
        "Host": parts.netloc,
        "Content-Type": "application/json",
        "User-Agent": "PaddleCloud-webhook/1",
    }
    pool_timeout = urllib3.Timeout(connect=timeout, read=timeout)
    pool: urllib3.HTTPConnectionPool
    if parts.scheme == "https":
        pool = urllib3.HTTPSConnectionPool(
            address, port, timeout=pool_timeout, retries=False, server_hostname=host, assert_hostname=host,
            cert_reqs="CERT_REQUIRED", ca_certs=certifi.where(),
        )
    else:
        pool = urllib3.HTTPConnectionPool(address, port, timeout=pool_timeout, retries=False)
    try:
        with pool:
            response = pool.urlopen(
                "POST", path, body=json.dumps(body).encode(), headers=headers, redirect=False,
                assert_same_host=False, preload_content=False,
            )
            response.read(64 * 1024)  # bounded: the answer's body is not used
            response.release_conn()
    except urllib3.exceptions.HTTPError as exc:
        raise WebhookTransient(f"POST {host}: {type(exc).__name__}") from None
    status = response.status
    if 200 <= status < 300:
        return status
    if status >= 500 or status == 429:
        raise WebhookTransient(f"POST {host}: HTTP {status}")
    redirect = " (redirects are not followed)" if 300 <= status < 400 else ""
    raise WebhookRefused(f"POST {host}: HTTP {status}{redirect}")
