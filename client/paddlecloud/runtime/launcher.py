"""paddlecloud-launch: starts one job process (pserver or trainer) the same way on every engine.

Contract with the engines (``local`` and ``kubernetes``): the engine sets these job facts as
environment variables and runs ``paddlecloud-launch`` (no arguments) as the process's command.

{variables}

What it does, in order:

1. Appends ``=== attempt started <time> ... ===`` to ``log.txt``; everything after (its own
   messages, pip's output, the entry's merged stdout+stderr) goes to that file and to stdout, and
   when it arrived to ``log.times`` beside it (``paddlecloud.contract.logtimes``: the portal shows each
   line's time from it; the log itself stays plain text). With ``PADDLECLOUD_LOG_LIMIT`` the file
   stays under that many bytes: the head and the end are kept, with a line saying how many bytes
   were dropped between them (``paddlecloud.contract.logcap``). With ``PADDLECLOUD_LOG_WRITER=engine``
   (the local engine) everything goes to stdout only: the engine's supervisor, outside the job's
   sandbox, writes log.txt and log.times from it under the same limit, so no process of the job
   can write past the cap through a descriptor of its own.
   The environment is never written anywhere (Paddle's launcher dumps it, secrets included).
   With ``PADDLECLOUD_ISOLATION_PORT`` (Kubernetes) it then waits until the pod's NetworkPolicies are in
   force, before anything else runs (``isolation``): past ``PADDLECLOUD_ISOLATION_TIMEOUT`` it fails (exit 73).
2. PS mode, pserver 0: serves the gloo HTTP rendezvous store (see ``gloo_store``).
3. ``<package>/requirements.txt`` present: gets a layer venv on the runtime the launcher runs in
   from the per-host cache (``venvcache``: only what the runtime lacks is installed) and runs the
   entry with its ``bin`` first on PATH and VIRTUAL_ENV set; without one, the entry runs in the
   launcher's own runtime (Paddle and the client). A failed install ends the launcher with
   ``installing requirements failed: <pip's last error line>`` (exit 70). The local engine builds the
   layer before the job starts (``paddlecloud.runtime.layer``, a step of its own): the launcher finds it.
4. Resolves peer host names to IPs (retrying while DNS is not there yet) and exports Paddle's
   variables (``launch_env.paddle_env``): ``paddlecloud`` itself is importable by the entry.
5. PS-mode trainers: joins a rendezvous round on pserver 0's store (asking again while the store is not up yet,
   up to ``PADDLECLOUD_PSERVER_WAIT_TIMEOUT``, then exit 69) and runs the entry with the round's
   ``SYS_JOB_ID`` (``rendezvous``): when another trainer was restarted the entry runs again with it in a
   new round, and a rendezvous not complete within ``PADDLECLOUD_RENDEZVOUS_TIMEOUT`` fails (exit 72).
   The entry starts once the store answers, with ``pserver_gate``'s start-up hook first on its PYTHONPATH: Paddle's
   ``init_worker`` waits there until every pserver accepts TCP (paddle-notes trap 3), and past
   ``PADDLECLOUD_PSERVER_WAIT_TIMEOUT`` the entry exits 69.
6. Runs the entry in the launcher's process group (the launcher makes itself a group leader if
   it is not one). Engines stop a job process with ``killpg(SIGTERM)`` and SIGKILL after a grace
   period; a SIGTERM/SIGINT/SIGHUP that reaches only the launcher (k8s signals PID 1) is relayed
   once to the whole group. When the entry's shell exits, the launcher (a child subreaper) waits
   for whatever it left running: 2 s, then SIGTERM, 5 s, then SIGKILL, so a launcher that exited
   leaves no process behind. Exits with the entry's own code (killed by signal N: 128+N).

The launcher's own failures (the reason is the last line of the log / stderr):
64 bad or missing facts, 68 a peer name did not resolve in time, 69 a pserver did not accept
connections in time (the entry's exit, see step 5), 70 the venv could not be created or pip failed,
71 an OS error (log dir, store port taken, cannot start /bin/sh), 72 the trainers' rendezvous did not
complete in time, 73 the pod's network isolation was not in force in time
(``paddlecloud.contract.exitcodes``), 128+N the launcher was signalled before the entry ran.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, BinaryIO

from paddlecloud.contract import exitcodes, jobenv, layout, logtimes, venvcache
from paddlecloud.contract.layout import LOG_NAME
from paddlecloud.runtime import isolation, launch_env, reaper
from paddlecloud.runtime.launch_env import Facts, FactsError
from paddlecloud.runtime.tee import Tee

if TYPE_CHECKING:
    # Imported where PS mode uses them (run_in_rounds, launch): http.server and http.client are about a third of
    # the launcher's own import time, paid by every process of every job before its entry starts otherwise.
    from paddlecloud.runtime import rendezvous

EXIT_BAD_FACTS = exitcodes.BAD_FACTS
EXIT_DNS = exitcodes.DNS
EXIT_PSERVER_UNREACHABLE = exitcodes.PSERVER_UNREACHABLE
EXIT_VENV = exitcodes.VENV
EXIT_OS_ERROR = exitcodes.OS_ERROR
EXIT_RENDEZVOUS = exitcodes.RENDEZVOUS
EXIT_ISOLATION = exitcodes.ISOLATION
MAX_ROUNDS = 100  # entry runs of one PS trainer attempt; each new round needs a restart by the engine
RELAYED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


Watcher = Callable[[], "rendezvous.Stop | None"]


class LaunchError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Interrupted(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum


def resolver(timeout: float, tee: Tee) -> launch_env.Resolver:
    """Name -> IP (IPv4 preferred), retried until ``timeout``: k8s DNS lags pod creation."""
    cache: dict[str, str] = {}

    def resolve(host: str) -> str:
        if host in cache:
            return cache[host]
        deadline = time.monotonic() + timeout
        waited = False
        while True:
            try:
                infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
                ips = [str(i[4][0]) for i in infos if i[0] == socket.AF_INET] or [str(i[4][0]) for i in infos]
                cache[host] = ips[0]
                return ips[0]
            except (socket.gaierror, IndexError) as e:
                if time.monotonic() >= deadline:
                    raise LaunchError(EXIT_DNS, f"host {host!r} did not resolve within {timeout:g}s: {e}") from None
                if not waited:
                    tee.line(f"waiting for DNS name {host}")
                    waited = True
                time.sleep(1.0)

    return resolve


class SignalRelay:
    """Relays a signal that reached the launcher to its process group, once per signal number."""

    def __init__(self) -> None:
        self.child_started = False
        self.spawning = False  # inside Popen: between the fork and the exec of the entry's shell
        self.exiting = False
        self._relayed: set[int] = set()

    @property
    def stopping(self) -> bool:
        """A stop signal came: the entry must not be started again."""
        return bool(self._relayed)

    def raise_if_stopping(self) -> None:
        """Unwind a wait between two runs of the entry (the handler raises only before the first one)."""
        if self._relayed:
            raise Interrupted(min(self._relayed))

    def install(self) -> None:
        for sig in RELAYED_SIGNALS:
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if signum in self._relayed or self.exiting:
            return  # our own relayed copy coming back (we are in the group too)
        self._relayed.add(signum)
        with contextlib.suppress(OSError):
            os.killpg(os.getpgrp(), signum)
        if not self.child_started and not self.spawning:
            raise Interrupted(signum)  # unwind venv install / waits; the entry never ran

    def resend(self) -> None:
        """Send the stop signals that came while the entry was being spawned to the group again: a child between
        its fork and its exec still runs our handler, which only sets a flag its exec forgets, so the first copy
        is lost and the entry would run on (until SIGKILL) as if no stop had come."""
        for signum in sorted(self._relayed):
            with contextlib.suppress(OSError):
                os.killpg(os.getpgrp(), signum)


def _own_process_group() -> None:
    # The relay signals our whole group: it must be ours, not a shell's holding other jobs.
    if os.getpgrp() != os.getpid():
        with contextlib.suppress(PermissionError):  # a session leader already leads its group
            os.setpgid(0, 0)


def _open_log(facts: Facts) -> BinaryIO:
    try:
        facts.log_dir.mkdir(parents=True, exist_ok=True)
        # Read-write, not O_APPEND: a capped log moves its kept tail down (logcap), which needs pwrite.
        fd = os.open(facts.log_dir / LOG_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        return os.fdopen(fd, "r+b", buffering=0)
    except OSError as e:
        raise LaunchError(EXIT_OS_ERROR, f"cannot open the log in {facts.log_dir}: {e}") from None


def _pump(src: BinaryIO, tee: Tee) -> None:
    # Chunks, not lines: partial lines (progress output) show up at once.
    fd = src.fileno()
    while chunk := os.read(fd, 65536):
        tee.write(chunk)


def _wait(proc: subprocess.Popen[bytes], watch: Watcher | None, relay: SignalRelay) -> rendezvous.Stop | None:
    """Wait for the entry to end; with a watch, stop it (every process of it) when the watch says so."""
    interval = None
    if watch is not None:
        from paddlecloud.runtime import rendezvous  # noqa: PLC0415 - PS mode only (see the imports)

        interval = rendezvous.LOOK_INTERVAL
    while True:
        try:
            proc.wait(timeout=interval)
            return None
        except subprocess.TimeoutExpired:
            stop = None if relay.stopping else watch() if watch else None
            if stop is not None:
                reaper.kill_descendants()
                proc.wait()
                return stop


def run_entry(
    facts: Facts, env: dict[str, str], tee: Tee, relay: SignalRelay, watch: Watcher | None = None
) -> int | rendezvous.Stop:
    """The entry's exit code, or why `watch` stopped it."""
    t0 = time.monotonic()
    relay.spawning = True  # a stop now must not unwind Popen half-way (the child would live on unwatched)
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", facts.entry],
            cwd=facts.package_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    except OSError as e:
        raise LaunchError(EXIT_OS_ERROR, f"cannot start /bin/sh in {facts.package_dir}: {e}") from None
    finally:
        relay.spawning = False
    relay.child_started, relay.exiting = True, False
    if relay.stopping:
        relay.resend()  # the shell has exec'd (Popen returns after that): now the signal lands
    assert proc.stdout is not None
    pump = threading.Thread(target=_pump, args=(proc.stdout, tee), daemon=True)
    pump.start()
    stop = _wait(proc, watch, relay)
    relay.exiting = True
    reaper.reap_descendants(tee.line)
    pump.join(timeout=5)  # bounded: a process we could not see may still hold the pipe
    if stop is not None:
        tee.line(f"entry stopped after {time.monotonic() - t0:.1f}s: {stop.message}")
        return stop
    code = proc.returncode
    code = 128 - code if code < 0 else code
    tee.line(f"entry exited with code {code} after {time.monotonic() - t0:.1f}s")
    return code


def run_in_rounds(facts: Facts, env: dict[str, str], tee: Tee, relay: SignalRelay) -> int:
    """A PS trainer: its entry in a rendezvous round (rendezvous.py), again in each newer one its peers open."""
    from paddlecloud.runtime import rendezvous  # noqa: PLC0415 - PS mode only (see the imports)

    endpoint = env["PADDLE_GLOO_HTTP_ENDPOINT"]
    client = rendezvous.Client(endpoint, facts.index)
    bound = f"{facts.pserver_wait_timeout:g}s ({jobenv.env_name('pserver_wait_timeout')})"
    told: list[str] = []

    def waiting(problem: str) -> None:
        relay.raise_if_stopping()
        if not told:
            told.append(problem)
            tee.line(f"the rendezvous store at {endpoint} does not answer yet ({problem}); asking again, up to {bound}")

    for run in range(MAX_ROUNDS):
        try:
            token, number = client.join(rerun=run > 0, within=facts.pserver_wait_timeout, waiting=waiting)
        except rendezvous.StoreUnreachable as e:
            message = f"the gloo rendezvous store at {endpoint} (pserver 0's launcher serves it) did not answer within "
            raise LaunchError(EXIT_PSERVER_UNREACHABLE, f"{message}{bound}: {e}") from None
        except (OSError, ValueError, KeyError, TypeError) as e:  # it answered, but not a round: not a time-out
            raise LaunchError(EXIT_OS_ERROR, f"the rendezvous store at {endpoint} answered no round: {e}") from None
        tee.line(f"rendezvous round {number} (SYS_JOB_ID={token})")
        watch = rendezvous.Watch(client, token, facts.trainers, facts.rendezvous_timeout)
        outcome = run_entry(facts, env | {"SYS_JOB_ID": token}, tee, relay, watch.check)
        if isinstance(outcome, int):
            return outcome
        if not outcome.rerun:
            raise LaunchError(EXIT_RENDEZVOUS, outcome.message)
        tee.line("running the entry again, with the other trainers, in the new round")
    raise LaunchError(EXIT_RENDEZVOUS, f"the trainers' rendezvous opened more than {MAX_ROUNDS} rounds")


def wait_for_isolation(facts: Facts, tee: Tee) -> None:
    """Never run anything of the job's before its NetworkPolicies hold it (isolation.py); no port: no wait."""
    if facts.isolation_port is None:
        return
    assert facts.node_ip is not None  # read_facts requires it with the port
    try:
        waited = isolation.wait_until_isolated(facts.node_ip, facts.isolation_port, facts.isolation_timeout)
    except isolation.IsolationError as e:
        raise LaunchError(EXIT_ISOLATION, str(e)) from None
    if waited is not None:
        tee.line(f"network isolation in force after {waited:.1f}s")


def launch(facts: Facts, tee: Tee, relay: SignalRelay) -> int:
    wait_for_isolation(facts, tee)
    store = None
    if facts.ps_mode and facts.role == "pserver" and facts.index == 0:
        assert facts.gloo_port is not None
        try:
            from paddlecloud.runtime.gloo_store import GlooStore  # noqa: PLC0415 - PS mode only

            store = GlooStore(facts.gloo_port)
        except OSError as e:
            raise LaunchError(EXIT_OS_ERROR, f"cannot serve the gloo store on port {facts.gloo_port}: {e}") from None
        tee.line(f"serving the gloo rendezvous store on port {facts.gloo_port}")
    cache = facts.venv_cache or venvcache.default_cache_dir()
    requirements = facts.package_dir / "requirements.txt"
    try:
        # A layer on the runtime this launcher runs in for requirements.txt, else that runtime itself.
        env = venvcache.job_env(dict(os.environ), requirements if requirements.is_file() else None, cache, tee.line)
    except venvcache.VenvError as e:
        raise LaunchError(EXIT_VENV, str(e)) from None
    except OSError as e:
        raise LaunchError(EXIT_VENV, f"installing requirements failed: {e}") from None
    env |= launch_env.paddle_env(facts, resolver(facts.pserver_wait_timeout, tee))
    if not venvcache.installed_in_site_packages():
        try:
            link_dir = str(venvcache.package_pythonpath(cache))
        except OSError as e:
            raise LaunchError(EXIT_OS_ERROR, f"cannot link paddlecloud into {cache}: {e}") from None
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), link_dir]))
    if facts.ps_mode and facts.role == "trainer":
        # Not a wait here: the entry starts at once and waits inside Paddle's init_worker (pserver_gate), so the
        # trainer's own start (importing Paddle, building its program) overlaps the pservers'.
        from paddlecloud.runtime import pserver_gate  # noqa: PLC0415 - PS mode only (see the imports)

        env["PYTHONPATH"] = pserver_gate.entry_pythonpath(env.get("PYTHONPATH"))
    try:
        if facts.ps_mode and facts.role == "trainer":
            return run_in_rounds(facts, env, tee, relay)
        outcome = run_entry(facts, env, tee, relay)
        assert isinstance(outcome, int)  # no watch, no stop
        return outcome
    finally:
        if store is not None:
            store.close()


def _best_effort_log(message: str) -> None:
    """Facts were bad: still try to leave the reason where the portal looks for the log."""
    if os.environ.get(jobenv.env_name("log_writer"), "").strip() == "engine":
        # The engine writes log.txt from stdout (and the job may not write it).
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.write(f"[paddlecloud-launch] {message}\n")
            sys.stdout.flush()
        return
    names = (jobenv.env_name("output_dir"), jobenv.env_name("role"), jobenv.env_name("index"))
    out, role, idx = (os.environ.get(k, "").strip() for k in names)
    if out and role in ("pserver", "trainer") and idx.isdigit():
        try:
            d = Path(out) / layout.worker_folder(role, int(idx))
            d.mkdir(parents=True, exist_ok=True)
            data = f"[paddlecloud-launch] {message}\n".encode()
            with (d / LOG_NAME).open("ab", buffering=0) as f:
                times = logtimes.open_recorder(f, d)
                times.note(len(data))
                times.stop()
                f.write(data)
        except OSError:
            pass


def main(argv: list[str] | None = None, hostname: Callable[[], str] = socket.gethostname) -> None:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] in ("-h", "--help"):
        print((__doc__ or "").replace("{variables}", jobenv.VARIABLES.rstrip("\n")))
        raise SystemExit(0)
    try:
        facts = launch_env.read_facts(os.environ, hostname())
    except FactsError as e:
        print(f"paddlecloud-launch: {e}", file=sys.stderr, flush=True)
        _best_effort_log(str(e))
        raise SystemExit(EXIT_BAD_FACTS) from None
    _own_process_group()
    relay = SignalRelay()
    relay.install()
    reaper.become_subreaper()
    tee = Tee(None)
    try:
        if not facts.log_by_engine:
            log = _open_log(facts)
            tee = Tee(log, logtimes.open_recorder(log, facts.log_dir), facts.log_limit)
        when = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        tee.write(f"=== attempt started {when} ({facts.role} {facts.index}, host {hostname()}) ===\n".encode())
        code = launch(facts, tee, relay)
    except LaunchError as e:
        tee.line(f"error: {e}")
        code = e.code
    except Interrupted as e:
        tee.line(f"stopped by signal {e.signum} before the entry started")
        code = 128 + e.signum
    # Nothing is left to relay: a late SIGTERM (the engine stopping the job) must not turn the
    # entry's own code into 143 while the interpreter shuts down with default handlers.
    for sig in RELAYED_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
