"""The gloo HTTP rendezvous store for parameter-server jobs, served by pserver 0's launcher, in rounds.

Paddle's own pserver 0 would serve it from inside ``fleet.init()`` and block there until every
trainer has finished its rendezvous, so it only starts listening on its PS port afterwards. The
launcher makes trainers wait until every pserver listens before it starts them (paddle-notes trap
3): with Paddle hosting the store that is a deadlock. So the launcher serves the store itself and
runs pservers with ``PADDLE_WITH_GLOO=0`` (pservers never use gloo in HTTP mode; they only host).

The protocol is exactly Paddle's ``paddle.distributed.fleet.utils.http_server.KVHandler``:
``PUT /<scope>/<key>`` stores the body, ``GET`` returns it (404 until set), ``DELETE`` marks the
key done (each rank deletes its own once its rendezvous is complete; nothing is removed). Paddle's
scope is ``<SYS_JOB_ID>_worker``.

Rounds (why a retried trainer no longer hangs): gloo joins the trainers in a full mesh once, at
``fleet.init()``; a trainer that dies leaves every other trainer's mesh broken for good, and a retry
of it that met the old keys would wait for peers that no longer listen (Paddle waits an hour). So
each trainer attempt joins a *round* here first (``/paddlecloud/join``) with a token of its own, and
its launcher sets ``SYS_JOB_ID`` to that token. A rank that joins again (the engine restarted it)
opens a new round; the keys of a token are kept in its round, so a new round starts with no stale
keys. Only such restarts open rounds (an entry run again joins the current one), so rounds never
chase each other. A
trainer that has not reached the rendezvous yet meets the others in the newest round when it does;
one that already met them in an older round sees it in ``/paddlecloud/status`` and its launcher
runs its entry again (paddlecloud.runtime.rendezvous): every trainer restarts together, the
pservers keep running (and keep what they hold).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

ROUNDS_SCOPE = "paddlecloud"  # /paddlecloud/join?token=..&rank=.., /paddlecloud/status?token=..
PADDLE_SCOPE_SUFFIX = "_worker"  # Paddle's gloo scope is "<SYS_JOB_ID>_worker"
TOKEN = re.compile(r"[a-z0-9]{8,64}")
MAX_VALUE = 1 << 20  # a gloo address is some bytes; anything this big is not one
MAX_MEMBERS = 10_000  # trainer attempts one job may make (retries are at most 10 per trainer)
RETIRED = -1  # the round of an attempt whose rank another attempt of its launcher took over


@dataclass
class _Member:
    """One trainer attempt: its rank, the round it is in, whether it reached the rendezvous (stored a key)."""

    rank: int
    round: int
    arrived: bool = False


class Rounds:
    """Which round each trainer attempt is in, and the keys, finished ranks and first arrival of each round."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.current = 0
        self.members: dict[str, _Member] = {}
        self.kv: dict[int, dict[str, bytes]] = {}
        self.done: dict[int, set[str]] = {}
        self.first_arrival: dict[int, float] = {}

    def _ranks(self, number: int) -> set[int]:
        return {m.rank for m in self.members.values() if m.round == number}

    def join(self, token: str, rank: int, rerun: bool = False) -> int:
        """The round of this attempt. A new attempt (the engine restarted its trainer) of a rank already in the
        current round opens a new round; an entry run again because a newer round opened (`rerun`) never
        does: it joins the current round, in place of any older attempt of its rank there."""
        member = self.members.get(token)
        if member is None:
            if len(self.members) >= MAX_MEMBERS:
                raise OverflowError(f"more than {MAX_MEMBERS} trainer attempts")
            if rerun:
                for other in self.members.values():
                    if other.rank == rank and other.round == self.current:
                        other.round = RETIRED
            elif rank in self._ranks(self.current):
                self.current += 1
                for old in [n for n in self.kv if n < self.current - 1]:  # only dying processes read those
                    del self.kv[old]
            member = self.members[token] = _Member(rank, self.current)
        return member.round

    def member(self, token: str) -> _Member | None:
        """The attempt, moved to the newest round if it has not met anyone yet and its rank is free there."""
        member = self.members.get(token)
        if (
            member is not None
            and not member.arrived
            and RETIRED < member.round < self.current
            and member.rank not in self._ranks(self.current)
        ):
            member.round = self.current
        return member

    def put(self, member: _Member, key: str, value: bytes) -> None:
        member.arrived = True
        self.kv.setdefault(member.round, {})[key] = value
        self.first_arrival.setdefault(member.round, self.clock())

    def get(self, member: _Member, key: str) -> bytes | None:
        return self.kv.get(member.round, {}).get(key)

    def delete(self, member: _Member, key: str) -> None:
        self.done.setdefault(member.round, set()).add(key)

    def status(self, member: _Member) -> dict[str, Any]:
        """What the attempt's launcher watches: its round against the newest, who arrived, who finished."""
        first = self.first_arrival.get(member.round)
        return {
            "round": member.round,
            "current": self.current,
            "arrived": member.arrived,
            "ranks": sorted(m.rank for m in self.members.values() if m.round == member.round and m.arrived),
            "done": len(self.done.get(member.round, ())),
            "waiting": None if first is None else round(self.clock() - first, 3),
        }


class _Store(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int) -> None:
        super().__init__(("", port), _Handler)
        self.lock = threading.Lock()
        self.rounds = Rounds()
        self.kv: dict[str, dict[str, bytes]] = {}  # scopes of no round (SYS_JOB_ID not a joined token)
        self.deleted: dict[str, set[str]] = {}


class _Handler(BaseHTTPRequestHandler):
    server: _Store

    def _key(self) -> tuple[str, str] | None:
        parts = self.path.split("/")
        if len(parts) != 3:
            self._status(400)
            return None
        return parts[1], parts[2]

    def _status(self, code: int, body: bytes = b"") -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _member(self, scope: str) -> _Member | None:
        """The attempt whose SYS_JOB_ID made this scope; None for a scope outside the rounds. Under the lock."""
        token = scope.removesuffix(PADDLE_SCOPE_SUFFIX)
        return self.server.rounds.member(token) if scope.endswith(PADDLE_SCOPE_SUFFIX) else None

    def _rounds_call(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        token, rank = query.get("token", ""), query.get("rank", "")
        if not TOKEN.fullmatch(token):
            self._status(400, b"token: 8 to 64 of a-z, 0-9")
            return
        rounds = self.server.rounds
        with self.server.lock:
            if url.path == f"/{ROUNDS_SCOPE}/join" and self.command == "POST" and rank.isdigit() and len(rank) < 6:
                try:
                    body = {"round": rounds.join(token, int(rank), rerun=query.get("rerun") == "1")}
                except OverflowError as exc:
                    self._status(507, str(exc).encode())
                    return
            elif url.path == f"/{ROUNDS_SCOPE}/status" and self.command == "GET" and token in rounds.members:
                member = rounds.member(token)
                assert member is not None
                body = rounds.status(member)
            else:
                self._status(404)
                return
        self._status(200, json.dumps(body).encode())

    def do_GET(self) -> None:
        if self.path.startswith(f"/{ROUNDS_SCOPE}/"):
            self._rounds_call()
            return
        key = self._key()
        if key is None:
            return
        with self.server.lock:
            member = self._member(key[0])
            if member is not None:
                value = self.server.rounds.get(member, key[1])
            else:
                value = self.server.kv.get(key[0], {}).get(key[1])
        if value is None:
            self._status(404)
            return
        self._status(200, value)

    def do_POST(self) -> None:
        self._rounds_call() if self.path.startswith(f"/{ROUNDS_SCOPE}/") else self._status(404)

    def do_PUT(self) -> None:
        key = self._key()
        if key is None:
            return
        raw = self.headers.get("Content-Length") or "0"
        length = int(raw) if raw.isdigit() else -1
        if not 0 <= length <= MAX_VALUE:
            self._status(413)
            return
        value = self.rfile.read(length)
        with self.server.lock:
            member = self._member(key[0])
            if member is not None:
                self.server.rounds.put(member, key[1], value)
            elif len(self.server.kv) < MAX_MEMBERS:
                self.server.kv.setdefault(key[0], {})[key[1]] = value
            else:
                self._status(507)
                return
        self._status(200)

    def do_DELETE(self) -> None:
        key = self._key()
        if key is None:
            return
        with self.server.lock:
            member = self._member(key[0])
            if member is not None:
                self.server.rounds.delete(member, key[1])
            elif len(self.server.deleted) < MAX_MEMBERS:
                self.server.deleted.setdefault(key[0], set()).add(key[1])
        self._status(200)

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per gloo poll would drown the job log


class GlooStore:
    """A running store; ``close()`` stops it (the launcher keeps it up for the job's life)."""

    def __init__(self, port: int) -> None:
        self._server = _Store(port)  # raises OSError when the port is taken
        self._thread = threading.Thread(target=self._server.serve_forever, name="gloo-store", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
