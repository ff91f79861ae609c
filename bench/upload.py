"""Upload benchmark: `paddlectl file cp` of a file to a portal on loopback against `cp` on the same disk, alternating.

    .venv/bin/python bench/upload.py                       # 256 MiB and 2 GiB: 1 warm-up, 3 timed rounds
    .venv/bin/python bench/upload.py --sizes 2G --rounds 2 --parallel 1 --chunk 8Mi --dir /mnt/scratch

For each size it starts a fresh portal as `make run` starts it (gunicorn with the flags of
scripts/common.sh, DEBUG off, the embedded defaults) on a private var directory, creates a user and
logs paddlectl in once, then alternates: `paddlectl file cp` of the file (this checkout's client, run
as a process, as a user runs it: start-up, hashing, chunks, complete) and `cp` of it next to the
uploaded copy, then `sync` of that copy (fsync: the portal fsyncs an upload before it answers
`completed`; `cp` alone leaves its copy in the page cache). Before each timed step the page cache's
dirty pages are written out (sync), so neither pays for the other's writes. It prints the throughputs,
the ratios to `cp` (goal >= 0.8 at 2 GiB) and to `cp` + fsync, the portal's peak RSS during the upload
(goal: flat with file size) and paddlectl's. Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import requests

ROOT = Path(__file__).resolve().parents[1]
PYTHON = Path(sys.executable)
BIN = PYTHON.parent
MIB = 1024 * 1024
GIB = 1024 * MIB
VERIFY_INLINE = 4 * GIB  # the portal's default: larger uploads are verified by a Celery worker, not started here


def parse_size(text: str) -> int:
    units = {"K": 1024, "M": MIB, "G": GIB}
    text = text.strip().upper().removesuffix("IB").removesuffix("B").removesuffix("I")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def human(size: int) -> str:
    return f"{size / GIB:g} GiB" if size >= GIB else f"{size / MIB:g} MiB"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def make_file(path: Path, size: int) -> None:
    block = os.urandom(8 * MIB)
    with path.open("wb") as handle:
        left = size
        while left > 0:
            handle.write(block[: min(len(block), left)])
            left -= min(len(block), left)


def gunicorn_flags(env: dict[str, str]) -> list[str]:
    """The flags `make run` starts gunicorn with (scripts/common.sh's GUNICORN_FLAGS), and its access log."""
    shown = subprocess.run(
        ["bash", "-c", 'source scripts/common.sh >/dev/null && printf "%s\\n" "${GUNICORN_FLAGS[@]}"'],
        cwd=ROOT, env=env, check=True, capture_output=True, text=True,
    ).stdout.split()
    return [*shown, "--access-logfile", "-"]


class Portal:
    """A real portal on a free loopback port, started as `make run` starts it, with its own var directory."""

    def __init__(self, workdir: Path) -> None:
        self.var = workdir / "var"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "PADDLECLOUD_VAR_DIR": str(self.var),
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            "DEBUG": "false",
            "PADDLECLOUD_EMBEDDED": "true",
            "PADDLECLOUD_PUBLIC_URL": self.url,
            "LOG_LEVEL": "WARNING",
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "client")]),
        }
        self.env.pop("DATABASE_URL", None)
        self.process: subprocess.Popen[bytes] | None = None
        self.log: BinaryIO | None = None

    def start(self, username: str, password: str) -> None:
        manage = [str(PYTHON), "manage.py"]
        subprocess.run([*manage, "bootstrap"], cwd=ROOT, env=self.env, check=True, stdout=subprocess.DEVNULL)
        create = (
            "from django.contrib.auth.models import User; "
            f"User.objects.create_user({username!r}, password={password!r})"
        )
        subprocess.run([*manage, "shell", "-c", create], cwd=ROOT, env=self.env, check=True, stdout=subprocess.DEVNULL)
        self.log = (self.var / "gunicorn.log").open("wb")  # open for the server's life, closed by stop()
        self.process = subprocess.Popen(
            [BIN / "gunicorn", "portal.wsgi", "--bind", f"127.0.0.1:{self.port}", *gunicorn_flags(self.env)],
            cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.url}/api/v1/version", timeout=5).ok:
                    return
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.2)
        raise SystemExit(f"the portal did not start; see {self.var / 'gunicorn.log'}")

    def worker_pids(self) -> list[int]:
        assert self.process is not None
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        return [int(pid) for pid in children]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(30)
        if self.log is not None:
            self.log.close()


class Paddlectl:
    """This checkout's paddlectl as a process, with its own config and token cache."""

    def __init__(self, workdir: Path, portal: Portal, username: str, password: str, extra_env: dict[str, str]) -> None:
        config = workdir / "paddle-config"
        config.write_text(
            f"datacenters:\n- name: local\n  username: {username}\n  password: {password}\n"
            f"  endpoint: {portal.url}\ncurrent-datacenter: local\n"
        )
        config.chmod(0o600)
        self.env = {
            **os.environ,
            "PADDLE_CONFIG": str(config),
            "PADDLE_TOKEN_CACHE": str(workdir / "token-cache"),
            "PYTHONPATH": str(ROOT / "client"),  # this checkout's client, whatever the venv installed
            **extra_env,
        }

    def run(self, *args: str) -> int:
        """Run paddlectl; its peak RSS in KiB (it must succeed)."""
        process = subprocess.Popen(
            [PYTHON, "-m", "paddlecloud.cli", *args], env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        assert process.stderr is not None
        errors = process.stderr.read()
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode:
            raise SystemExit(f"paddlectl {' '.join(args)} failed: {errors.decode(errors='replace')}")
        return int(usage.ru_maxrss)


def status_kib(pid: int, name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    return 0


def reset_peak(pid: int) -> bool:
    """Reset VmHWM (Linux >= 4.0) so the peak measured is the upload's, not the start-up's."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


class RssSampler:
    """Peak RSS of the server's workers while an upload runs: VmHWM, and samples of VmRSS as a check."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.peak_sample = 0
        self.peak_hwm = 0
        self.reset = False
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop_event.wait(0.05):
            for pid in self.pids:
                self.peak_sample = max(self.peak_sample, status_kib(pid, "VmRSS"))

    def __enter__(self) -> RssSampler:
        self.reset = all(reset_peak(pid) for pid in self.pids)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.thread.join()
        self.peak_hwm = max(status_kib(pid, "VmHWM") for pid in self.pids)


@dataclass
class Figures:
    """One size's timed rounds: MiB/s of each, peaks in KiB."""

    uploads: list[float] = field(default_factory=list)
    copies: list[float] = field(default_factory=list)
    durable: list[float] = field(default_factory=list)  # cp, then the copy fsynced (as complete does)
    server_kib: list[int] = field(default_factory=list)
    client_kib: list[int] = field(default_factory=list)
    reset: bool = True


def bench_size(size: int, args: argparse.Namespace, extra_env: dict[str, str]) -> Figures:
    workdir = Path(tempfile.mkdtemp(prefix="paddlecloud-bench-", dir=args.dir))
    portal = Portal(workdir)
    username, password = "bench", "bench-password-123"
    try:
        portal.start(username, password)
        paddlectl = Paddlectl(workdir, portal, username, password, extra_env)
        home = f"/pfs/local/home/{username}"
        paddlectl.run("login")  # the token is cached: the timed copies log in no more than a user's would
        disk_home = portal.var / "pfs" / "local" / "home" / username
        source = workdir / "source.bin"
        make_file(source, size)
        cp_args = ["--chunk-size", args.chunk] if args.chunk else []
        figures = Figures()
        for round_ in range(-args.warmup, args.rounds):
            os.sync()  # no dirty pages left by the step before: neither pays for the other's writeback
            began = time.perf_counter()
            with RssSampler(portal.worker_pids()) as sampler:
                client_kib = paddlectl.run("file", "cp", *cp_args, str(source), f"{home}/uploaded.bin")
            upload = size / (time.perf_counter() - began) / MIB
            os.sync()
            began = time.perf_counter()
            subprocess.run(["cp", str(source), str(disk_home / "copied.bin")], check=True)
            copied = time.perf_counter() - began
            subprocess.run(["sync", str(disk_home / "copied.bin")], check=True)  # fsync(2) of the copy
            copy, durable = size / copied / MIB, size / (time.perf_counter() - began) / MIB
            label = f"round {round_ + 1}" if round_ >= 0 else "warm-up"
            print(
                f"  {human(size)} {label}: paddlectl file cp {upload:6.0f} MiB/s, cp {copy:6.0f} MiB/s "
                f"(+fsync {durable:5.0f}), ratio {upload / copy:4.2f} ({upload / durable:4.2f}); "
                f"portal peak RSS {sampler.peak_hwm / 1024:4.0f} MB "
                f"(sampled {sampler.peak_sample / 1024:.0f} MB), paddlectl {client_kib / 1024:.0f} MB",
                flush=True,
            )
            if round_ >= 0:  # the warm-up is not counted: first touches of memory and disk
                figures.uploads.append(upload)
                figures.copies.append(copy)
                figures.durable.append(durable)
                figures.server_kib.append(sampler.peak_hwm)
                figures.client_kib.append(client_kib)
                figures.reset = figures.reset and sampler.reset
            (disk_home / "uploaded.bin").unlink()
            (disk_home / "copied.bin").unlink()
        return figures
    finally:
        portal.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="256M,2G", help="comma-separated sizes (default 256M,2G)")
    parser.add_argument("--rounds", type=int, default=3, help="timed upload/cp rounds per size (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    parser.add_argument("--chunk", default="", help="paddlectl --chunk-size (default: paddlectl's choice)")
    parser.add_argument("--parallel", default="", help="PADDLECTL_UPLOAD_PARALLEL (default: paddlectl's, 4)")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the file, the PFS and cp's copy live")
    args = parser.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    if max(sizes) > VERIFY_INLINE:
        raise SystemExit(f"sizes above {human(VERIFY_INLINE)} are verified by a Celery worker; this bench starts none")
    extra_env = {"PADDLECTL_UPLOAD_PARALLEL": args.parallel} if args.parallel else {}
    print(
        f"upload benchmark: paddlectl file cp vs cp, sizes {', '.join(human(s) for s in sizes)}, {args.rounds} rounds, "
        f"chunk {args.chunk or 'paddlectl default'}, parallel {args.parallel or 'paddlectl default'}, "
        f"disk of {args.dir}",
        flush=True,
    )
    results = {size: bench_size(size, args, extra_env) for size in sizes}
    print()
    print("medians of the timed rounds (best in brackets); ratio: paddlectl / cp, and / cp with the copy fsynced")
    print(f"{'size':>9} {'paddlectl MiB/s':>16} {'cp MiB/s':>15} {'cp+fsync':>9} {'ratio':>11} {'portal peak':>12} "
          f"{'paddlectl':>10}")
    for size, r in results.items():
        upload, copy, durable = (statistics.median(x) for x in (r.uploads, r.copies, r.durable))
        print(
            f"{human(size):>9} {upload:7.0f} ({max(r.uploads):6.0f}) {copy:6.0f} ({max(r.copies):6.0f}) {durable:9.0f} "
            f"{upload / copy:5.2f} ({upload / durable:4.2f}) {max(r.server_kib) / 1024:9.0f} MB "
            f"{max(r.client_kib) / 1024:7.0f} MB"
        )
    print(
        "goals: ratio >= 0.8 at 2 GiB; peak RSS flat with file size"
        + ("" if all(r.reset for r in results.values()) else " (the portal's peak includes its start: no VmHWM reset)")
    )


if __name__ == "__main__":
    main()
