"""A parameter-server trainer's side of the rendezvous rounds (gloo_store): join a round, watch it while the entry runs.

The launcher of every PS trainer joins a round before it starts its entry and exports the round's
token as ``SYS_JOB_ID`` (Paddle's gloo prefix). While the entry runs it looks at the round twice a
second (``Watch.check``) and stops the entry when:

- a newer round opened after this trainer met its peers: one of them was restarted, and the mesh this
  trainer is in is broken for good. Its launcher runs the entry again in the new round (``Stop.rerun``),
  so every trainer restarts together (from the checkpoint the script keeps, if it keeps one); the
  pservers run on. Both engines restart only the trainer that failed; this is what makes that work.
- the round's rendezvous began (a trainer reached it) and did not complete within the bound
  (``PADDLECLOUD_RENDEZVOUS_TIMEOUT``): the launcher fails with exit code 72 and a message naming the
  bound and the trainers that never came. Without it Paddle waits an hour, and a retried trainer whose
  peers have already ended would wait for ever.

A store that does not answer never stops an entry: pserver 0 serves it, and a lost pserver fails the job anyway.
Joining is different: pserver 0's launcher may start serving the store after a trainer's launcher asks (it starts
with them, and on a loaded host or in a pod scheduled later it comes second), so the join is asked again until the
store answers, within the pservers' own bound (``PADDLECLOUD_PSERVER_WAIT_TIMEOUT``). A trainer that ran without a
round instead would wait for its peers under another gloo prefix than theirs: they never meet, and the job fails at
the rendezvous bound five minutes later (it did, in CI, on a loaded host).
"""

from __future__ import annotations

import http.client
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from paddlecloud.contract.jobenv import env_name
from paddlecloud.runtime.gloo_store import ROUNDS_SCOPE

LOOK_INTERVAL = 0.5  # seconds between two looks at the round
CALL_TIMEOUT = 5.0  # seconds one call to the store may take
JOIN_INTERVAL = 0.2  # seconds between two tries to join while the store is not up yet


class StoreUnreachable(Exception):
    """The store did not answer a join within the bound."""


class StoreAnswered(OSError):
    """The store answered, with an error status: asking again would get the same answer."""


@dataclass(frozen=True)
class Look:
    """The store's view of a trainer attempt's round (gloo_store.Rounds.status)."""

    round: int
    current: int  # the newest round
    arrived: bool  # this attempt reached the rendezvous (stored its key)
    ranks: tuple[int, ...]  # the trainers that reached it in this round
    done: int  # how many finished it
    waiting: float | None  # seconds since the first arrival in this round; None before any

    @classmethod
    def parse(cls, body: dict[str, Any]) -> Look:
        waiting = body.get("waiting")
        return cls(
            round=int(body["round"]),
            current=int(body["current"]),
            arrived=bool(body["arrived"]),
            ranks=tuple(int(r) for r in body["ranks"]),
            done=int(body["done"]),
            waiting=None if waiting is None else float(waiting),
        )


@dataclass(frozen=True)
class Stop:
    """Why the launcher stops its entry: to run it again in a newer round, or because the round cannot complete."""

    rerun: bool
    message: str


def _listed(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks))


def verdict(look: Look, trainers: int, bound: float) -> Stop | None:
    """What to do about the entry after this look: nothing (None), run it again, or fail it at the bound."""
    if look.current > look.round and look.arrived:
        return Stop(
            True,
            f"a trainer was restarted and opened rendezvous round {look.current}; "
            f"this trainer's gloo peers of round {look.round} are gone",
        )
    if look.done >= trainers or look.waiting is None or look.waiting <= bound:
        return None
    missing = sorted(set(range(trainers)) - set(look.ranks))
    who = (
        f"trainer(s) {_listed(missing)} never reached it (ended, or not started)"
        if missing
        else "every trainer reached it but their connections did not complete"
    )
    return Stop(
        False,
        f"the gloo rendezvous of the {trainers} trainers (round {look.round}) did not complete within "
        f"{bound:g}s ({env_name('rendezvous_timeout')}): {who}",
    )


class Client:
    """Calls to the rounds of the store at ``endpoint`` (PADDLE_GLOO_HTTP_ENDPOINT, ``ip:port``) for one rank."""

    def __init__(self, endpoint: str, rank: int) -> None:
        host, port = endpoint.rsplit(":", 1)
        self.host, self.port, self.rank = host, int(port), rank

    def _call(self, method: str, path: str) -> dict[str, Any]:
        """The JSON answer; StoreAnswered when it answers an error status, another OSError when it cannot be reached
        (or hangs up), ValueError when the answer is not JSON."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=CALL_TIMEOUT)
        try:
            conn.request(method, path)
            response = conn.getresponse()
            body = response.read(1 << 16)
        except http.client.HTTPException as exc:
            raise OSError(f"bad answer from the store: {exc!r}") from None
        finally:
            conn.close()
        if response.status != 200:
            raise StoreAnswered(f"the store answered {response.status} {body[:200].decode(errors='replace')}")
        answer = json.loads(body)
        if not isinstance(answer, dict):
            raise ValueError(f"the store answered {answer!r}")
        return answer

    def join(
        self, rerun: bool = False, within: float = 0.0, waiting: Callable[[str], None] | None = None
    ) -> tuple[str, int]:
        """(token, round) of a new attempt of this rank; `rerun`: its entry runs again because a newer round opened.

        Asked again for up to `within` seconds while the store cannot be reached (not up yet, or hanging up), always
        with the same token: the store answers a token it knows with its round, so a join that reached it before its
        answer was lost is never counted twice (a second attempt of a rank would open a new round). `waiting` hears
        why before each new try (and may raise to give up). StoreUnreachable past the bound; StoreAnswered, ValueError
        or KeyError when the store answers, but not a round."""
        token = secrets.token_hex(8)
        deadline = time.monotonic() + within
        while True:
            try:
                answer = self._call("POST", f"/{ROUNDS_SCOPE}/join?token={token}&rank={self.rank}&rerun={int(rerun)}")
                return token, int(answer["round"])
            except StoreAnswered:
                raise
            except OSError as exc:  # refused, unreachable, timed out, hung up: not serving (yet)
                problem = f"{exc.__class__.__name__}: {exc}"
                if time.monotonic() >= deadline:
                    raise StoreUnreachable(problem) from None
                if waiting is not None:
                    waiting(problem)
                time.sleep(JOIN_INTERVAL)

    def look(self, token: str) -> Look:
        return Look.parse(self._call("GET", f"/{ROUNDS_SCOPE}/status?token={token}"))


class Watch:
    """Looks at one attempt's round at most every LOOK_INTERVAL seconds while its entry runs."""

    def __init__(self, client: Client, token: str, trainers: int, bound: float) -> None:
        self.client, self.token, self.trainers, self.bound = client, token, trainers, bound
        self._next = 0.0

    def check(self) -> Stop | None:
        now = time.monotonic()
        if now < self._next:
            return None
        self._next = now + LOOK_INTERVAL
        try:
            look = self.client.look(self.token)
        except (OSError, ValueError, KeyError, TypeError):
            return None  # no news is not a failure: see the module's last paragraph
        return verdict(look, self.trainers, self.bound)
