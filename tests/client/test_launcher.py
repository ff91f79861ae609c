"""paddlecloud-launch as a process, without Paddle: exit codes, log tee, signals, pserver wait."""

from __future__ import annotations

import http.client
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from paddlecloud.runtime import launcher, pserver_gate
from paddlecloud.runtime.gloo_store import GlooStore
from paddlecloud.runtime.launcher import EXIT_BAD_FACTS, EXIT_DNS, EXIT_PSERVER_UNREACHABLE, LaunchError
from paddlecloud.runtime.tee import Tee

from tests.wait import wait_for

from .conftest import LAUNCHER, base_facts, launch_env, run_launcher

PY = shlex.quote(sys.executable)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def log_of(facts: dict[str, str]) -> str:
    worker = f"{facts['PADDLECLOUD_ROLE']}_{facts['PADDLECLOUD_INDEX']}"
    path = Path(facts["PADDLECLOUD_OUTPUT_DIR"]) / worker / "log.txt"
    return path.read_text() if path.exists() else ""


def test_exit_code_and_log(facts: dict[str, str]) -> None:
    facts["PADDLECLOUD_ENTRY"] = "echo hi; echo oops >&2; exit 3"
    r = run_launcher(facts)
    assert r.returncode == 3
    log = log_of(facts)
    assert "hi\n" in log and "oops\n" in log  # stderr merged
    assert "=== attempt started" in log
    assert "entry exited with code 3" in log
    assert "hi\n" in r.stdout  # tee'd to the launcher's own stdout too


def test_log_appends_across_attempts(facts: dict[str, str]) -> None:
    facts["PADDLECLOUD_ENTRY"] = "echo run"
    assert run_launcher(facts).returncode == 0
    assert run_launcher(facts).returncode == 0
    log = log_of(facts)
    assert log.count("=== attempt started") == 2 and log.count("run\n") == 2


def test_env_and_secrets_never_logged(facts: dict[str, str]) -> None:
    facts["MY_API_TOKEN"] = "s3cr3t-value-42"
    facts["PADDLECLOUD_ENTRY"] = 'test "$MY_API_TOKEN" = s3cr3t-value-42 && echo token-visible-to-entry'
    r = run_launcher(facts)
    assert r.returncode == 0
    log = log_of(facts)
    assert "token-visible-to-entry" in log
    assert "s3cr3t-value-42" not in log and "s3cr3t-value-42" not in r.stdout + r.stderr
    assert "PADDLE_TRAINER_ENDPOINTS" not in log


def test_entry_sees_paddle_env_and_cwd(facts: dict[str, str]) -> None:
    facts["PADDLECLOUD_ENTRY"] = (
        'echo "cwd=$(pwd) id=$PADDLE_TRAINER_ID backend=$PADDLE_DISTRI_BACKEND unbuf=$PYTHONUNBUFFERED"'
    )
    assert run_launcher(facts).returncode == 0
    assert f"cwd={facts['PADDLECLOUD_PACKAGE_DIR']} id=0 backend=gloo unbuf=1" in log_of(facts)


def test_paddlecloud_importable_from_entry_without_launcher_deps(facts: dict[str, str]) -> None:
    # The base interpreter has no paddlecloud: only the launcher's PYTHONPATH link dir supplies it.
    base = shlex.quote(getattr(sys, "_base_executable", sys.executable))
    facts["PADDLECLOUD_ENTRY"] = f"{base} -c 'import paddlecloud.dataset as d; print(\"ok\", d.trainers())'"
    assert run_launcher(facts).returncode == 0
    assert "ok 1" in log_of(facts)


def test_signal_death_maps_to_128_plus_signal(facts: dict[str, str]) -> None:
    facts["PADDLECLOUD_ENTRY"] = "kill -9 $$"
    assert run_launcher(facts).returncode == 128 + 9


def test_bad_facts_exit_64_naming_the_variable(facts: dict[str, str]) -> None:
    facts["PADDLECLOUD_TRAINERS"] = "zero"
    r = run_launcher(facts)
    assert r.returncode == EXIT_BAD_FACTS
    assert "PADDLECLOUD_TRAINERS" in r.stderr
    assert "PADDLECLOUD_TRAINERS" in log_of(facts)  # best effort: where the portal looks


def test_with_the_engine_writing_the_log_everything_goes_to_stdout_and_no_file_is_written(
    facts: dict[str, str], tmp_path: Path
) -> None:
    """PADDLECLOUD_LOG_WRITER=engine (the local engine: its supervisor writes log.txt from this stdout)."""
    facts["PADDLECLOUD_LOG_WRITER"] = "engine"
    facts["PADDLECLOUD_ENTRY"] = "echo hi; echo oops >&2; exit 3"
    r = run_launcher(facts)
    assert r.returncode == 3
    assert "=== attempt started" in r.stdout and "hi\n" in r.stdout and "oops\n" in r.stdout
    assert "entry exited with code 3" in r.stdout
    facts["PADDLECLOUD_TRAINERS"] = "zero"  # bad facts: the reason goes to stdout too
    r = run_launcher(facts)
    assert r.returncode == EXIT_BAD_FACTS and "PADDLECLOUD_TRAINERS" in r.stdout
    assert not any(tmp_path.glob("output/**/log.*"))


def test_leftover_background_processes_are_stopped(facts: dict[str, str]) -> None:
    facts["PADDLECLOUD_ENTRY"] = "sleep 300 & echo left-one-behind; exit 5"
    p = _start(facts)
    assert p.wait(timeout=30) == 5
    assert "sending SIGTERM to 1 process(es) the entry left running" in log_of(facts)
    wait_for(lambda: _group_gone(p.pid), "the process group to be gone", 5, interval=0.05)


def test_launcher_waits_for_a_grandchild_that_outlives_the_shell(facts: dict[str, str]) -> None:
    # dash does not exec the last command: the shell can die first and the real entry later.
    facts["PADDLECLOUD_ENTRY"] = "(sleep 1; echo grandchild-finished) & kill -9 $$"
    p = _start(facts)
    assert p.wait(timeout=30) == 137
    assert "grandchild-finished" in log_of(facts)
    assert "process(es) the entry left running" not in log_of(facts)


TRAP_ENTRY = "trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.05; done"


def _start(facts: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        LAUNCHER, env=launch_env(facts), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def test_sigterm_to_launcher_alone_is_forwarded(facts: dict[str, str]) -> None:
    facts["PADDLECLOUD_ENTRY"] = TRAP_ENTRY
    p = _start(facts)
    wait_for(lambda: "ready" in log_of(facts), "the entry to be ready", 20, interval=0.05)
    os.kill(p.pid, signal.SIGTERM)  # what k8s does to PID 1
    assert p.wait(timeout=20) == 7
    assert "got-term" in log_of(facts)
    wait_for(lambda: _group_gone(p.pid), "the process group to be gone", 20, interval=0.05)


def test_sigterm_to_group_exits_with_entry_code(facts: dict[str, str]) -> None:
    facts["PADDLECLOUD_ENTRY"] = TRAP_ENTRY
    p = _start(facts)
    wait_for(lambda: "ready" in log_of(facts), "the entry to be ready", 20, interval=0.05)
    os.killpg(p.pid, signal.SIGTERM)  # what the local engine does
    assert p.wait(timeout=20) == 7
    wait_for(lambda: _group_gone(p.pid), "the process group to be gone", 20, interval=0.05)


def test_launcher_leads_its_own_group_when_started_without_one(facts: dict[str, str]) -> None:
    # Started by hand from a script (no new session): relaying must not hit the script's group.
    facts["PADDLECLOUD_ENTRY"] = TRAP_ENTRY
    p = subprocess.Popen(LAUNCHER, env=launch_env(facts), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: "ready" in log_of(facts), "the entry to be ready", 20, interval=0.05)
    assert os.getpgid(p.pid) == p.pid != os.getpgrp()
    os.kill(p.pid, signal.SIGTERM)
    assert p.wait(timeout=20) == 7


# A stand-in for Paddle's fleet module (paddle/distributed/fleet/fleet.py): the launcher's start-up hook gates its
# Fleet.init_worker (pserver_gate), so a trainer's entry starts at once and waits only where Paddle would push.
FAKE_FLEET = """
class Fleet:
    def init_worker(self):
        print("init-worker-ran", flush=True)
"""
FLEET_ENTRY = f"echo trainer-started; {PY} -c 'from paddle.distributed.fleet.fleet import Fleet; Fleet().init_worker()'"


@pytest.fixture
def gloo_store() -> Iterator[GlooStore]:
    """pserver 0's rendezvous store, as its launcher serves it: a PS trainer's launcher joins a round there first."""
    store = GlooStore(0)
    yield store
    store.close()


def ps_trainer_facts(tmp_path: Path, ports: list[int], store: GlooStore, timeout: str = "1") -> dict[str, str]:
    facts = base_facts(
        tmp_path,
        PADDLECLOUD_TRAINERS="1",
        PADDLECLOUD_PSERVERS=str(len(ports)),
        PADDLECLOUD_PSERVER_HOSTS=",".join(["127.0.0.1"] * len(ports)),
        PADDLECLOUD_PSERVER_PORTS=",".join(map(str, ports)),
        PADDLECLOUD_GLOO_PORT=str(store.port),
        PADDLECLOUD_PSERVER_WAIT_TIMEOUT=timeout,
        PADDLECLOUD_ENTRY=FLEET_ENTRY,
    )
    fleet = Path(facts["PADDLECLOUD_PACKAGE_DIR"]) / "paddle" / "distributed" / "fleet"
    fleet.mkdir(parents=True)
    for folder in (fleet, fleet.parent, fleet.parent.parent):
        (folder / "__init__.py").write_text("")
    (fleet / "fleet.py").write_text(FAKE_FLEET)
    return facts


def test_pserver_wait_timeout_names_the_pserver(tmp_path: Path, gloo_store: GlooStore) -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        up, down = listening.getsockname()[1], free_port()
        facts = ps_trainer_facts(tmp_path, [up, down], gloo_store)
        t0 = time.monotonic()
        r = run_launcher(facts)
    assert r.returncode == EXIT_PSERVER_UNREACHABLE
    assert time.monotonic() - t0 < 15
    log = log_of(facts)
    assert f"error: pserver 1 (127.0.0.1:{down}) did not accept connections within 1s" in log
    assert "trainer-started" in log  # the entry's own start did not wait
    assert "init-worker-ran" not in log  # Paddle's push never ran without its pservers


def test_trainer_starts_at_once_and_its_init_worker_waits_until_every_pserver_listens(
    tmp_path: Path, gloo_store: GlooStore
) -> None:
    ports = [free_port(), free_port()]
    facts = ps_trainer_facts(tmp_path, ports, gloo_store, timeout="30")
    p = _start(facts)
    wait_for(lambda: "trainer-started" in log_of(facts), "the entry to start", 20, interval=0.05)
    time.sleep(1.0)
    assert p.poll() is None  # still waiting, inside init_worker
    assert "init-worker-ran" not in log_of(facts)
    socks = []
    for port in ports:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
        socks.append(s)
    try:
        assert p.wait(timeout=20) == 0
    finally:
        for s in socks:
            s.close()
    log = log_of(facts)
    assert "all 2 pserver(s) accept connections" in log
    assert log.index("all 2 pserver(s) accept connections") < log.index("init-worker-ran")


def test_the_start_up_hook_runs_the_sitecustomize_it_hides_and_gates_the_fleet_that_one_imports(
    tmp_path: Path, gloo_store: GlooStore
) -> None:
    """A venv's or the system's sitecustomize still runs after ours; a Fleet it imports is gated, its source read."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import paddle.distributed.fleet.fleet\nprint('their-sitecustomize-ran')\n")
    facts = ps_trainer_facts(tmp_path, [free_port()], gloo_store)
    pkg = facts["PADDLECLOUD_PACKAGE_DIR"]
    code = (
        "import inspect; from paddle.distributed.fleet.fleet import Fleet; "
        "from paddlecloud.runtime import pserver_gate; "
        "print('gated', getattr(Fleet.init_worker, pserver_gate.WAITED_MARK, False)); "
        "print('source', 'init-worker-ran' in inspect.getmodule(Fleet).__loader__.get_source(Fleet.__module__))"
    )
    env = launch_env(facts) | {"PYTHONPATH": pserver_gate.entry_pythonpath(os.pathsep.join([str(user), pkg]))}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["their-sitecustomize-ran", "gated True", "source True"]


def test_pserver0_serves_the_gloo_store(tmp_path: Path) -> None:
    gloo = free_port()
    script = (
        "import urllib.request as u, os; "
        f"b='http://127.0.0.1:{gloo}/worker/k'; "
        "u.urlopen(u.Request(b, data=b'v1', method='PUT')); "
        "print('got', u.urlopen(b).read().decode(), 'gloo', os.environ['PADDLE_WITH_GLOO'])"
    )
    facts = base_facts(
        tmp_path,
        PADDLECLOUD_ROLE="pserver",
        PADDLECLOUD_PSERVERS="1",
        PADDLECLOUD_PSERVER_HOSTS="127.0.0.1",
        PADDLECLOUD_PSERVER_PORTS=str(free_port()),
        PADDLECLOUD_GLOO_PORT=str(gloo),
        PADDLECLOUD_ENTRY=f"{PY} -c {shlex.quote(script)}",
    )
    r = run_launcher(facts)
    assert r.returncode == 0, log_of(facts)
    assert "got v1 gloo 0" in log_of(facts)


def _http(port: int, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request(method, path, body=body)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_gloo_store_protocol() -> None:
    # Paddle's KVHandler semantics, which the gloo HTTP client relies on.
    store = GlooStore(0)
    try:
        assert _http(store.port, "GET", "/worker/missing") == (404, b"")
        assert _http(store.port, "PUT", "/worker/rank0", b"\x00\x01addr")[0] == 200
        assert _http(store.port, "GET", "/worker/rank0") == (200, b"\x00\x01addr")
        assert _http(store.port, "DELETE", "/worker/rank0")[0] == 200
        assert _http(store.port, "GET", "/too/many/parts")[0] == 400
    finally:
        store.close()


def test_resolver_retries_until_dns_has_the_name(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def flaky(host: str, *args: object, **kwargs: object) -> list[tuple[object, ...]]:
        calls.append(host)
        if len(calls) < 3:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("fd00::1", 0, 0, 0)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", 0)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", flaky)
    monkeypatch.setattr(time, "sleep", lambda s: None)
    resolve = launcher.resolver(30, Tee(None))
    assert resolve("job-x-pserver-0.job-x") == "10.1.2.3"  # IPv4 preferred
    assert resolve("job-x-pserver-0.job-x") == "10.1.2.3" and len(calls) == 3  # cached


def test_resolver_gives_up_naming_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    def never(host: str, *args: object, **kwargs: object) -> list[tuple[object, ...]]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", never)
    with pytest.raises(LaunchError, match=r"'job-x-pserver-1\.job-x' did not resolve within 0s") as e:
        launcher.resolver(0, Tee(None))("job-x-pserver-1.job-x")
    assert e.value.code == EXIT_DNS


STOP_DURING_SPAWN = r"""
import os, signal, subprocess, sys, types
from pathlib import Path
from paddlecloud.runtime import launcher

relay = launcher.SignalRelay()
relay.install()
real_popen = subprocess.Popen


def popen_after_a_stop(*args, **kwargs):
    # The stop lands while the entry is being spawned, before its process can act on it: a real child between
    # fork and exec runs our handler, which only sets a flag its exec forgets. Sent before the fork here, so
    # the child surely never gets this copy.
    os.killpg(os.getpgrp(), signal.SIGTERM)
    return real_popen(*args, **kwargs)


subprocess.Popen = popen_after_a_stop
facts = types.SimpleNamespace(entry="exec sleep 60", package_dir=Path.cwd())
print("CODE", launcher.run_entry(facts, dict(os.environ), launcher.Tee(None), relay), flush=True)
"""


def test_a_stop_that_comes_while_the_entry_is_spawned_still_stops_it(tmp_path: Path) -> None:
    # Seen under load: a job killed 0.2 s after it started left one trainer running until SIGKILL (137).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    run = subprocess.run(
        [sys.executable, "-c", STOP_DURING_SPAWN], cwd=tmp_path, env=env, start_new_session=True,
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert "CODE 143" in run.stdout, run.stdout + run.stderr  # the entry died of the SIGTERM, at once
