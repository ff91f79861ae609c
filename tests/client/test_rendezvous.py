"""Rendezvous rounds of PS trainers: the store's bookkeeping, the launcher's verdict, and launchers without Paddle.

Real Paddle retries run in tests/jobs/test_ps_retry.py; here the entry speaks Paddle's HTTP store protocol itself.
"""

from __future__ import annotations

import shlex
import signal
import sys
import time
from pathlib import Path

import pytest
from paddlecloud.contract import exitcodes
from paddlecloud.contract.jobenv import JobEnv, JobEnvError
from paddlecloud.runtime.gloo_store import RETIRED, GlooStore, Rounds
from paddlecloud.runtime.rendezvous import Client, Look, verdict

from tests.wait import wait_for

from .conftest import base_facts, run_launcher
from .test_launcher import _start, free_port, log_of

PY = shlex.quote(sys.executable)
TOKENS = [f"token{i:04d}" for i in range(10)]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_first_attempts_share_round_0_and_a_restarted_rank_opens_round_1() -> None:
    rounds = Rounds()
    assert [rounds.join(TOKENS[0], 0), rounds.join(TOKENS[1], 1)] == [0, 0]
    assert rounds.join(TOKENS[0], 0) == 0  # the same attempt asking again
    assert rounds.join(TOKENS[2], 0) == 1  # trainer 0 restarted by its engine
    assert rounds.join(TOKENS[3], 1, rerun=True) == 1  # trainer 1's entry run again: joins, opens nothing


def test_a_new_round_starts_without_the_old_keys() -> None:
    rounds = Rounds()
    rounds.join(TOKENS[0], 0)
    rounds.join(TOKENS[1], 1)
    old = [rounds.member(TOKENS[0]), rounds.member(TOKENS[1])]
    assert old[0] is not None and old[1] is not None
    rounds.put(old[0], "0", b"old address of 0")
    rounds.put(old[1], "1", b"old address of 1")
    rounds.join(TOKENS[2], 0)
    new = rounds.member(TOKENS[2])
    assert new is not None and rounds.get(new, "1") is None and rounds.get(new, "0") is None
    assert rounds.get(old[0], "1") == b"old address of 1"  # the old mesh's own view is untouched


def test_an_attempt_not_at_the_rendezvous_yet_meets_the_others_in_the_newest_round() -> None:
    rounds = Rounds()
    rounds.join(TOKENS[0], 0)
    rounds.join(TOKENS[1], 1)  # still importing Paddle when trainer 0 is restarted
    rounds.join(TOKENS[2], 0)
    late = rounds.member(TOKENS[1])
    assert late is not None and late.round == 1
    restarted = rounds.member(TOKENS[2])
    assert restarted is not None
    rounds.put(restarted, "0", b"a")
    assert rounds.get(late, "0") == b"a"


def test_an_attempt_that_met_its_peers_sees_the_newer_round_and_its_rerun_takes_its_place() -> None:
    rounds = Rounds()
    for i in (0, 1):
        rounds.join(TOKENS[i], i)
        member = rounds.member(TOKENS[i])
        assert member is not None
        rounds.put(member, str(i), b"x")
    rounds.join(TOKENS[2], 0)
    stale = rounds.member(TOKENS[1])
    assert stale is not None and stale.round == 0  # it arrived: it stays where its mesh is
    look = Look.parse(rounds.status(stale))
    assert (look.round, look.current, look.arrived) == (0, 1, True)
    assert verdict(look, trainers=2, bound=60) is not None
    rounds.join(TOKENS[3], 1, rerun=True)
    rounds.join(TOKENS[4], 1, rerun=True)  # a second rerun of rank 1 in the same round retires the first
    first_rerun = rounds.member(TOKENS[3])
    assert first_rerun is not None and first_rerun.round == RETIRED and rounds.current == 1


def test_status_counts_arrivals_finishes_and_the_wait_since_the_first_arrival() -> None:
    clock = Clock()
    rounds = Rounds(clock)
    rounds.join(TOKENS[0], 0)
    rounds.join(TOKENS[1], 1)
    zero = rounds.member(TOKENS[0])
    assert zero is not None
    assert Look.parse(rounds.status(zero)).waiting is None
    rounds.put(zero, "0", b"a")
    clock.now += 7.5
    look = Look.parse(rounds.status(zero))
    assert (look.ranks, look.done, look.waiting) == ((0,), 0, 7.5)
    rounds.delete(zero, "0")
    assert Look.parse(rounds.status(zero)).done == 1


def look(**changes: object) -> Look:
    fields: dict[str, object] = {"round": 0, "current": 0, "arrived": True, "ranks": (0,), "done": 0, "waiting": 1.0}
    fields.update(changes)
    return Look(**fields)  # type: ignore[arg-type]


def test_verdict_fails_a_round_past_its_bound_naming_the_bound_and_who_never_came() -> None:
    stop = verdict(look(waiting=30.5, ranks=(0, 2)), trainers=4, bound=30)
    assert stop is not None and not stop.rerun
    assert stop.message == (
        "the gloo rendezvous of the 4 trainers (round 0) did not complete within 30s "
        "(PADDLECLOUD_RENDEZVOUS_TIMEOUT): trainer(s) 1, 3 never reached it (ended, or not started)"
    )
    every = verdict(look(waiting=31, ranks=(0, 1)), trainers=2, bound=30)
    assert every is not None and "every trainer reached it but their connections did not complete" in every.message


@pytest.mark.parametrize(
    "state",
    [
        {"waiting": None},  # nobody reached the rendezvous: no gloo at all (a script without fleet) or not yet
        {"waiting": 29.9},
        {"waiting": 500.0, "done": 2},  # complete long ago
        {"current": 1, "arrived": False, "waiting": None},  # the store moves it on when it arrives
    ],
)
def test_verdict_lets_the_entry_run(state: dict[str, object]) -> None:
    assert verdict(look(**state), trainers=2, bound=30) is None


def test_the_bound_variable_is_checked() -> None:
    base = JobEnv(role="trainer", trainers=1, pservers=1, entry="x", output_dir="/o").to_env()
    assert JobEnv.from_env({**base, "PADDLECLOUD_RENDEZVOUS_TIMEOUT": "2.5"}).rendezvous_timeout == 2.5
    for bad in ("0", "-1", "nan", "inf", "soon"):
        with pytest.raises(JobEnvError, match="PADDLECLOUD_RENDEZVOUS_TIMEOUT"):
            JobEnv.from_env({**base, "PADDLECLOUD_RENDEZVOUS_TIMEOUT": bad})


# The entry as Paddle's gloo would act in it: store its address under its SYS_JOB_ID scope, then wait.
ARRIVE = (
    "import os, pathlib, time, urllib.request as u; "
    "runs = pathlib.Path(os.environ['PADDLECLOUD_OUTPUT_DIR']) / 'runs'; "
    "n = len(runs.read_text()) if runs.exists() else 0; runs.write_text('x' * (n + 1)); "
    "scope = f\"http://{os.environ['PADDLE_GLOO_HTTP_ENDPOINT']}/{os.environ['SYS_JOB_ID']}_worker/\"; "
    "print('run', n, os.environ['SYS_JOB_ID'], flush=True); "
    "n > 0 and os._exit(0); "
    "u.urlopen(u.Request(scope + os.environ['PADDLE_TRAINER_ID'], data=b'address', method='PUT')); "
    "print('arrived', flush=True); time.sleep(60)"
)


def trainer_1_facts(tmp_path: Path, port: int, bound: str, **overrides: str) -> dict[str, str]:
    """Trainer 1 of 2 in a PS job whose one pserver is the store on `port` (it accepts TCP, which is all the wait
    asks)."""
    return base_facts(
        tmp_path,
        PADDLECLOUD_INDEX="1",
        PADDLECLOUD_TRAINERS="2",
        PADDLECLOUD_TRAINER_HOSTS="127.0.0.1,127.0.0.1",
        PADDLECLOUD_TRAINER_PORTS="40001,40002",
        PADDLECLOUD_PSERVERS="1",
        PADDLECLOUD_PSERVER_HOSTS="127.0.0.1",
        PADDLECLOUD_PSERVER_PORTS=str(port),
        PADDLECLOUD_GLOO_PORT=str(port),
        PADDLECLOUD_RENDEZVOUS_TIMEOUT=bound,
        PADDLECLOUD_ENTRY=f"{PY} -c {shlex.quote(ARRIVE)}",
        **overrides,
    )


def test_a_rendezvous_that_cannot_complete_fails_the_trainer_at_the_bound(tmp_path: Path) -> None:
    store = GlooStore(0)
    try:
        facts = trainer_1_facts(tmp_path, store.port, bound="1")
        t0 = time.monotonic()
        result = run_launcher(facts, timeout=30)
    finally:
        store.close()
    log = log_of(facts)
    assert result.returncode == exitcodes.RENDEZVOUS, log
    assert time.monotonic() - t0 < 20  # not the entry's 60 s sleep: the launcher stopped it
    assert (
        "error: the gloo rendezvous of the 2 trainers (round 0) did not complete within 1s "
        "(PADDLECLOUD_RENDEZVOUS_TIMEOUT): trainer(s) 0 never reached it" in log
    )


def test_a_trainer_whose_peer_was_restarted_runs_its_entry_again_in_the_new_round(tmp_path: Path) -> None:
    store = GlooStore(0)
    facts = trainer_1_facts(tmp_path, store.port, bound="300")
    launcher = _start(facts)
    try:
        wait_for(lambda: "arrived" in log_of(facts), "trainer 1 to reach the rendezvous", 30, interval=0.1)
        peer = Client(f"127.0.0.1:{store.port}", 0)
        assert peer.join()[1] == 0  # trainer 0's first attempt joins round 0 ...
        assert peer.join()[1] == 1  # ... and its engine's restart of it opens round 1
        assert launcher.wait(timeout=30) == 0
    finally:
        launcher.kill()
        store.close()
    log = log_of(facts)
    assert "entry stopped after" in log and "a trainer was restarted and opened rendezvous round 1" in log
    assert "rendezvous round 1 (SYS_JOB_ID=" in log and "run 1 " in log


def test_a_trainer_started_before_pserver_0_serves_the_store_joins_round_0_when_it_does(tmp_path: Path) -> None:
    """pserver 0's launcher serves the store and may start after the trainers' (a loaded host, a pod scheduled
    later): the trainer's join waits for it. A trainer that ran without a round met no peer (CI, 2026-11-30)."""
    port = free_port()
    facts = trainer_1_facts(tmp_path, port, bound="300")
    launcher = _start(facts)
    store = None
    try:
        wait_for(lambda: "does not answer yet" in log_of(facts), "trainer 1 to find no store", 30, interval=0.1)
        assert launcher.poll() is None, log_of(facts)
        store = GlooStore(port)
        wait_for(lambda: "arrived" in log_of(facts), "trainer 1 to reach the rendezvous", 30, interval=0.1)
        assert Client(f"127.0.0.1:{port}", 0).join()[1] == 0  # trainer 0 meets it in round 0: it joined once
    finally:
        launcher.kill()
        if store is not None:
            store.close()
    log = log_of(facts)
    assert "rendezvous round 0 (SYS_JOB_ID=" in log and "without rounds" not in log, log


def test_a_store_that_never_answers_fails_the_trainer_at_the_pservers_bound(tmp_path: Path) -> None:
    facts = trainer_1_facts(tmp_path, free_port(), bound="300", PADDLECLOUD_PSERVER_WAIT_TIMEOUT="1")
    t0 = time.monotonic()
    result = run_launcher(facts, timeout=30)
    log = log_of(facts)
    assert result.returncode == exitcodes.PSERVER_UNREACHABLE, log
    assert time.monotonic() - t0 < 20, log
    assert "error: the gloo rendezvous store at 127.0.0.1:" in log, log
    assert "(pserver 0's launcher serves it) did not answer within 1s (PADDLECLOUD_PSERVER_WAIT_TIMEOUT)" in log, log
    assert "arrived" not in log and "run 0" not in log  # the entry never ran


def test_a_trainer_waiting_for_the_store_stops_at_once_when_its_job_is_stopped(tmp_path: Path) -> None:
    facts = trainer_1_facts(tmp_path, free_port(), bound="300")
    launcher = _start(facts)
    try:
        wait_for(lambda: "does not answer yet" in log_of(facts), "trainer 1 to find no store", 30, interval=0.1)
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=10) == 128 + signal.SIGTERM  # not the 300 s bound
    finally:
        launcher.kill()
    assert "run 0" not in log_of(facts)  # the entry never ran
