"""POST a JSON body to a user's webhook: to a public address only, pinned to the address that was checked.

The name is resolved once, every address it gives must be public by core/addresses.py's rule (unless the operator
allows private ones: PADDLECLOUD_WEBHOOK_ALLOW_PRIVATE), and the connection goes to that checked address
(with the URL's Host and TLS name), so a name that re-resolves to 127.0.0.1 between the check and
the connection (DNS rebinding) reaches nothing new. No redirects, a bounded answer, and one deadline
for the whole POST, from connect to the end of the answer: a receiver that trickles its answer a
byte at a time (each read in time) is cut there, so it holds a worker slot for at most that long.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any
from urllib.parse import SplitResult, urlsplit

import certifi

from core import addresses

ANSWER_LIMIT = 64 * 1024  # bytes of the answer's body read (it is not used)


class WebhookRefused(Exception):
    """Never worth retrying: where the URL points is not allowed, or the receiver said no (4xx)."""


class WebhookTransient(Exception):
    """Worth retrying later: no connection, a timeout, a 5xx or 429."""


def resolve_checked(host: str, port: int, allow_private: bool) -> str:
    """The one address the POST goes to; WebhookRefused if any address of the name is not allowed."""
    try:
        found = addresses.resolve(host, port)
    except (OSError, UnicodeError) as exc:
        raise WebhookTransient(f"cannot resolve {host}: {exc}") from None
    if not found or not all(addresses.allowed(address, allow_private) for address in found):
        raise WebhookRefused(addresses.refusal(host, found, allow_private))
    return found[0]


@contextmanager
def _cut_at(sock: socket.socket, deadline: float) -> Iterator[None]:
    """Shut the connection down at the deadline: every read or write on it (TLS included) then ends at once."""
    # A duplicate descriptor of the same connection: TLS takes the original over (detaches it), and a
    # shutdown through any descriptor ends the connection for all of them.
    cutter = sock.dup()

    def cut() -> None:
        with suppress(OSError):  # already closed: the POST ended in time
            cutter.shutdown(socket.SHUT_RDWR)

    watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), cut)
    watchdog.daemon = True
    watchdog.start()
    try:
        yield
    finally:
        watchdog.cancel()
        cutter.close()


def _exchange(sock: socket.socket, parts: SplitResult, body: bytes) -> int:
    """Send the POST on a connected socket; the answer's status (its body read up to ANSWER_LIMIT)."""
    connection = http.client.HTTPConnection(parts.hostname or "")
    connection.sock = sock  # already connected to the checked address: http.client never resolves
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = {"Host": parts.netloc, "Content-Type": "application/json", "User-Agent": "PaddleCloud-webhook/1"}
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        response.read(ANSWER_LIMIT)
        return response.status
    finally:
        connection.close()


def _post(address: str, parts: SplitResult, body: bytes, deadline: float) -> int:
    port = parts.port or (443 if parts.scheme == "https" else 80)
    raw = socket.create_connection((address, port), timeout=max(0.001, deadline - time.monotonic()))
    with raw, _cut_at(raw, deadline):
        sock = raw
        if parts.scheme == "https":
            context = ssl.create_default_context(cafile=certifi.where())
            sock = context.wrap_socket(raw, server_hostname=parts.hostname)
        return _exchange(sock, parts, body)


def post_json(url: str, body: dict[str, Any], *, timeout: float, allow_private: bool) -> int:
    """POST `body` to `url` within `timeout` seconds in all; a 2xx status, else WebhookRefused or WebhookTransient."""
    deadline = time.monotonic() + timeout
    parts = urlsplit(url)
    host = parts.hostname or ""
    address = resolve_checked(host, parts.port or (443 if parts.scheme == "https" else 80), allow_private)
    try:
        status = _post(address, parts, json.dumps(body).encode(), deadline)
    except (OSError, http.client.HTTPException) as exc:
        if time.monotonic() >= deadline:
            raise WebhookTransient(f"POST {host}: no complete answer within {timeout:g} s") from None
        raise WebhookTransient(f"POST {host}: {type(exc).__name__}") from None
    if 200 <= status < 300:
        return status
    if status >= 500 or status == 429:
        raise WebhookTransient(f"POST {host}: HTTP {status}")
    redirect = " (redirects are not followed)" if 300 <= status < 400 else ""
    raise WebhookRefused(f"POST {host}: HTTP {status}{redirect}")
