"""The cluster's components as processes: each in its own process group with a log file, waited on until
it answers its health check, stopped and started again (tests make a component unreachable this way)."""

from __future__ import annotations

import contextlib
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from kubernetes.client.exceptions import ApiException

from tools.k8s.testcluster.processes import die_with_parent, kill_group


class ClusterError(RuntimeError):
    """A component failed to start or become ready; the message names its log file."""


class Components:
    """Base of TestCluster: spawns, waits on, restarts and kills its components (one process group each)."""

    server: str  # the API server's https URL
    token: str  # bearer token of the cluster admin
    ca_file: Path  # the test CA, which signed the API server's certificate
    ports: dict[str, int]  # every listening port, by component ("apiserver", "kwok", ...)

    def __init__(self, bin_dir: Path, work_dir: Path, die_with_parent: bool) -> None:
        self.bin_dir = bin_dir
        self.work_dir = work_dir
        self.die_with_parent = die_with_parent
        self.log_dir = self.work_dir / "logs"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._args: dict[str, tuple[str, ...]] = {}  # each component's arguments, for start_component
        self.exes: dict[str, Path] = {}  # each component's binary
        self.extra_health_urls: dict[str, str] = {}  # optional components' readiness URLs (kueue.py)

    @property
    def pids(self) -> dict[str, int]:
        """Component name -> pid (each is also the id of the component's own process group)."""
        return {name: proc.pid for name, proc in self.procs.items()}

    def _spawn(self, name: str, *args: str, exe: Path | None = None, env: dict[str, str] | None = None) -> None:
        self._args[name] = args
        self.exes[name] = exe = exe or self.bin_dir / name
        log = (self.log_dir / f"{name}.log").open("ab")
        try:
            self.procs[name] = subprocess.Popen(
                [str(exe), *args],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.work_dir,
                start_new_session=True,  # own process group: stop() kills the whole group
                preexec_fn=die_with_parent if self.die_with_parent else None,
            )
        finally:
            log.close()

    def _wait(self, name: str, deadline: float, ready: Callable[[], bool], what: str = "ready") -> None:
        while True:
            proc = self.procs.get(name)
            if proc is not None and proc.poll() is not None:
                raise ClusterError(f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}")
            with contextlib.suppress(OSError, ApiException, ValueError):
                if ready():
                    return
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out waiting for {name} ({what}):\n{self.log_tail(name)}")
            time.sleep(0.1)

    def _kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        kill_group(proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1)

    def log_tail(self, name: str, lines: int = 30) -> str:
        """Last lines of a component's log file (for error messages)."""
        path = self.log_dir / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return f"--- {path} (last {lines} lines) ---\n" + "\n".join(text.splitlines()[-lines:])

    def _http_get(self, url: str) -> bytes:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        if "127.0.0.1:" + str(self.ports["apiserver"]) not in url:
            # controller-manager/scheduler serve self-signed certs of their own; only liveness matters here.
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.token}"})  # noqa: S310
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx))
        try:
            with opener.open(req, timeout=5) as resp:
                return bytes(resp.read())
        except urllib.error.HTTPError:
            return b""

    def _health_urls(self) -> dict[str, str]:
        """The URL each control-plane component answers `ok` on once it serves."""
        return {
            "kube-apiserver": f"{self.server}/readyz",
            "kube-controller-manager": f"https://127.0.0.1:{self.ports['controller-manager']}/healthz",
            "kube-scheduler": f"https://127.0.0.1:{self.ports['scheduler']}/healthz",
            "kwok": f"http://127.0.0.1:{self.ports['kwok']}/healthz",
            **self.extra_health_urls,
        }

    def _wait_healthy(self, name: str, deadline: float) -> None:
        url = self._health_urls()[name]
        self._wait(name, deadline, lambda: self._http_get(url) == b"ok")

    # ----- helpers for tests -----

    def stop_component(self, name: str) -> None:
        """Stop one running component (e.g. "kube-apiserver": an unreachable cluster) and wait until it is gone."""
        self._kill(name)

    def start_component(self, name: str, timeout: float = 60.0) -> None:
        """Start a component stopped by stop_component again (same arguments, same port) and wait until it serves."""
        if name in self.procs:
            return
        self._spawn(name, *self._args[name], exe=self.exes[name])
        if name in self._health_urls():
            self._wait_healthy(name, time.monotonic() + timeout)
