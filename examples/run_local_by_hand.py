"""Run one job by hand on this machine: N pservers + M trainers, each a paddlecloud-launch process.

This is what the ``local`` engine does, without the portal: it copies the package into
``<output>/package`` (as an upload would), picks free 127.0.0.1 ports, sets the launcher's
PADDLECLOUD_* facts, starts every process in its own session, stops the pservers once every
trainer has exited 0 (they never exit by themselves), and fails the job when a trainer fails or
a pserver dies first. Logs: ``<output>/output/<role>_<i>/log.txt``.

    python examples/run_local_by_hand.py examples/fit_a_line --pservers 2 --trainers 2
    python examples/run_local_by_hand.py examples/fit_a_line_collective --trainers 2
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

LOSS = re.compile(r"\bloss ([0-9.eE+-]+)")


@dataclass
class Result:
    ok: bool
    reason: str
    wall_seconds: float
    exit_codes: dict[str, int | None]
    logs: dict[str, Path]
    losses: dict[str, list[float]] = field(default_factory=dict)
    pgids: dict[str, int] = field(default_factory=dict)  # each launcher leads its own group


def free_ports(n: int) -> list[int]:
    # Hold all sockets open until every port is chosen so the n ports are distinct.
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def _stop(procs: dict[str, subprocess.Popen[bytes]], grace: float = 10.0) -> None:
    for p in procs.values():
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    for p in procs.values():
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def run_job(
    package: Path,
    trainers: int,
    pservers: int = 0,
    output: Path | None = None,
    entry: str = "python train.py",
    timeout: float = 600.0,
    extra_env: dict[str, str] | None = None,
) -> Result:
    out = output or Path(tempfile.mkdtemp(prefix="paddlecloud-job-"))
    pkg = out / "package"
    shutil.rmtree(pkg, ignore_errors=True)
    shutil.copytree(package, pkg, ignore=shutil.ignore_patterns("data", "__pycache__"))
    ports = free_ports(pservers + trainers + 2)
    ps_ports, tr_ports = ports[:pservers], ports[pservers : pservers + trainers]
    facts = {
        "PADDLECLOUD_TRAINERS": str(trainers),
        "PADDLECLOUD_PSERVERS": str(pservers),
        "PADDLECLOUD_PSERVER_HOSTS": ",".join(["127.0.0.1"] * pservers),
        "PADDLECLOUD_PSERVER_PORTS": ",".join(map(str, ps_ports)),
        "PADDLECLOUD_TRAINER_HOSTS": ",".join(["127.0.0.1"] * trainers),
        "PADDLECLOUD_TRAINER_PORTS": ",".join(map(str, tr_ports)),
        "PADDLECLOUD_GLOO_PORT": str(ports[-2]),
        "PADDLECLOUD_MASTER_PORT": str(ports[-1]),
        "PADDLECLOUD_JOB_NAME": package.name,
        "PADDLECLOUD_DATACENTER": "local",
        "PADDLECLOUD_USERNAME": os.environ.get("USER", "me"),
        "PADDLECLOUD_PACKAGE_DIR": str(pkg),
        "PADDLECLOUD_ENTRY": entry,
        "PADDLECLOUD_OUTPUT_DIR": str(out / "output"),
        "PADDLECLOUD_POD_IP": "127.0.0.1",
        **(extra_env or {}),
    }
    launcher = [sys.executable, "-m", "paddlecloud.launcher"]
    procs: dict[str, subprocess.Popen[bytes]] = {}
    t0 = time.monotonic()
    roles = [("pserver", i) for i in range(pservers)] + [("trainer", i) for i in range(trainers)]
    for role, i in roles:
        env = {**os.environ, **facts, "PADDLECLOUD_ROLE": role, "PADDLECLOUD_INDEX": str(i)}
        procs[f"{role}_{i}"] = subprocess.Popen(
            launcher, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True
        )
    trainer_procs = {k: p for k, p in procs.items() if k.startswith("trainer")}
    ps_procs = {k: p for k, p in procs.items() if k.startswith("pserver")}
    reason = ""
    while not reason:
        time.sleep(0.2)
        codes = {k: p.poll() for k, p in trainer_procs.items()}
        failed = {k: c for k, c in codes.items() if c not in (None, 0)}
        lost = {k: p.poll() for k, p in ps_procs.items() if p.poll() is not None}
        if failed:
            reason = f"trainer failed: {failed}"
        elif lost:
            reason = f"pserver lost: {lost}"  # trainers may still exit 0 (paddle-notes trap 8)
        elif all(c == 0 for c in codes.values()):
            reason = "succeeded"
        elif time.monotonic() - t0 > timeout:
            reason = f"timed out after {timeout:g}s"
    wall = time.monotonic() - t0
    _stop(procs)
    logs = {k: out / "output" / k / "log.txt" for k in procs}
    losses = {
        k: [float(m.group(1)) for m in LOSS.finditer(p.read_text(errors="replace"))] if p.exists() else []
        for k, p in logs.items()
    }
    return Result(
        ok=reason == "succeeded",
        reason=reason,
        wall_seconds=wall,
        exit_codes={k: p.returncode for k, p in procs.items()},
        logs=logs,
        losses=losses,
        pgids={k: p.pid for k, p in procs.items()},
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("package", type=Path)
    ap.add_argument("--trainers", type=int, default=2)
    ap.add_argument("--pservers", type=int, default=0)
    ap.add_argument("--output", type=Path)
    ap.add_argument("--entry", default="python train.py")
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args()
    r = run_job(args.package, args.trainers, args.pservers, args.output, args.entry, args.timeout)
    print(f"{r.reason} in {r.wall_seconds:.1f}s (trainers done; pservers then stopped)")
    for k, code in r.exit_codes.items():
        loss = r.losses.get(k) or []
        trend = f"loss {loss[0]:.3f} -> {loss[-1]:.3f}" if loss else ""
        print(f"  {k}: exit {code} {trend}  {r.logs[k]}")
    raise SystemExit(0 if r.ok else 1)


if __name__ == "__main__":
    main()
