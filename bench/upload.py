"""Upload benchmark: a file through the API over loopback against `cp` on the same disk, alternating.

    .venv/bin/python bench/upload.py                    # 256 MiB and 2 GiB: 1 warm-up, 3 timed rounds
    .venv/bin/python bench/upload.py --sizes 1G --rounds 3 --threads 4 --dir /mnt/scratch

For each size it starts a fresh portal (gunicorn, as `make run` starts it) on a private var directory,
creates a user, then alternates: upload the file (whole-file checksum on the client, chunks in parallel,
complete) and `cp` it next to the uploaded copy. It prints both throughputs, their ratio (goal >= 0.5)
and the server's peak RSS during the upload (goal < 200 MB and flat with file size). Prints figures;
it is not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

import requests
import xxhash

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv" / "bin" / "python"
GUNICORN = ROOT / ".venv" / "bin" / "gunicorn"
MIB = 1024 * 1024


def parse_size(text: str) -> int:
    units = {"K": 1024, "M": MIB, "G": 1024 * MIB}
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


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


class Portal:
    """A real portal on a free loopback port, with its own var directory and a user with a token."""

    def __init__(self, workdir: Path) -> None:
        self.var = workdir / "var"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "PADDLECLOUD_VAR_DIR": str(self.var),
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            "LOG_LEVEL": "WARNING",
        }
        self.env.pop("DATABASE_URL", None)
        self.process: subprocess.Popen[bytes] | None = None
        self.log: BinaryIO | None = None

    def start(self) -> str:
        subprocess.run(
            [PYTHON, "manage.py", "bootstrap"], cwd=ROOT, env=self.env, check=True, stdout=subprocess.DEVNULL
        )
        token = (
            subprocess.run(
                [
                    PYTHON,
                    "manage.py",
                    "shell",
                    "-c",
                    "from django.contrib.auth.models import User; from accounts.models import issue_token; "
                    "print(issue_token(User.objects.create_user('bench', 'bench@example.com', 'bench-password')).key)",
                ],
                cwd=ROOT,
                env=self.env,
                check=True,
                capture_output=True,
                text=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        self.log = (self.var / "gunicorn.log").open("wb")  # open for the server's life, closed by stop()
        self.process = subprocess.Popen(
            [
                GUNICORN,
                "portal.wsgi",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                "2",
                "--threads",
                "4",
                "--timeout",
                "600",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.url}/api/v1/version", timeout=2).ok:
                    return token
            except requests.ConnectionError:
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


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
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


def upload(url: str, token: str, source: Path, target: str, chunk: int, threads: int) -> None:
    headers = {"Authorization": f"Token {token}"}
    size = source.stat().st_size
    hasher = xxhash.xxh3_128()
    with source.open("rb") as handle:
        while block := handle.read(4 * MIB):
            hasher.update(block)
    started = requests.post(
        f"{url}/api/v1/files/uploads",
        json={"path": target, "size": size, "checksum": f"xxh3_128:{hasher.hexdigest()}", "chunk_size": chunk},
        headers=headers,
        timeout=60,
    )
    started.raise_for_status()
    upload_id, count = started.json()["id"], started.json()["chunks"]
    local = threading.local()
    fd = os.open(source, os.O_RDONLY)

    def send(index: int) -> None:
        session = getattr(local, "session", None)
        if session is None:
            session = local.session = requests.Session()
            session.headers.update(headers)
        piece = os.pread(fd, chunk, index * chunk)
        response = session.put(
            f"{url}/api/v1/files/uploads/{upload_id}/chunks/{index}",
            data=piece,
            headers={
                "X-Chunk-Checksum": f"xxh3_128:{xxhash.xxh3_128_hexdigest(piece)}",
                "Content-Type": "application/octet-stream",
            },
            timeout=600,
        )
        response.raise_for_status()

    try:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(send, range(count)))
    finally:
        os.close(fd)
    done = requests.post(f"{url}/api/v1/files/uploads/{upload_id}/complete", headers=headers, timeout=600)
    done.raise_for_status()
    while done.json()["state"] == "verifying":  # large files are verified in the background
        time.sleep(0.2)
        done = requests.get(f"{url}/api/v1/files/uploads/{upload_id}", headers=headers, timeout=60)
    if done.json()["state"] != "completed":
        raise SystemExit(f"upload ended {done.json()['state']}: {done.json()['error']}")


def bench_size(size: int, rounds: int, warmup: int, chunk: int, threads: int, base: Path) -> dict[str, float]:
    workdir = Path(tempfile.mkdtemp(prefix="paddlecloud-bench-", dir=base))
    portal = Portal(workdir)
    try:
        token = portal.start()
        source = workdir / "source.bin"
        make_file(source, size)
        home = portal.var / "pfs" / "local" / "home" / "bench"
        uploads: list[float] = []
        copies: list[float] = []
        peaks: list[int] = []
        samples: list[int] = []
        for round_ in range(-warmup, rounds):
            # Each timed copy starts with no dirty pages left by the one before (else the second pays
            # for the first one's writeback).
            os.sync()
            began = time.perf_counter()
            with RssSampler(portal.worker_pids()) as sampler:
                upload(portal.url, token, source, "/pfs/local/home/bench/uploaded.bin", chunk, threads)
            uploads.append(size / (time.perf_counter() - began) / MIB)
            peaks.append(sampler.peak_hwm)
            samples.append(sampler.peak_sample)
            os.sync()
            began = time.perf_counter()
            subprocess.run(["cp", str(source), str(home / "copied.bin")], check=True)
            copies.append(size / (time.perf_counter() - began) / MIB)
            label = f"round {round_ + 1}" if round_ >= 0 else "warm-up"
            print(
                f"  {human(size)} {label}: upload {uploads[-1]:7.0f} MiB/s, cp {copies[-1]:7.0f} MiB/s, "
                f"server peak RSS {peaks[-1] / 1024:5.0f} MB (sampled {samples[-1] / 1024:.0f} MB)",
                flush=True,
            )
            if round_ < 0:  # not counted: first touches of memory and disk
                for figures in (uploads, copies, peaks, samples):
                    figures.pop()
            for name in ("uploaded.bin", "copied.bin"):
                (home / name).unlink()
            os.sync()
        return {
            "upload": statistics.median(uploads),
            "cp": statistics.median(copies),
            "upload_best": max(uploads),
            "cp_best": max(copies),
            "rss_mb": max(peaks) / 1024,
            "reset": float(sampler.reset),
        }
    finally:
        portal.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def human(size: int) -> str:
    return f"{size / (1024 * MIB):g} GiB" if size >= 1024 * MIB else f"{size / MIB:g} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="256M,2G", help="comma-separated sizes (default 256M,2G)")
    parser.add_argument("--rounds", type=int, default=3, help="timed upload/cp rounds per size (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    parser.add_argument("--chunk", default="8M", help="chunk size (default 8M, the portal's default)")
    parser.add_argument("--threads", type=int, default=4, help="chunks sent in parallel (default 4)")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the file, the PFS and cp's copy live")
    args = parser.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    base = Path(args.dir)
    print(
        f"upload benchmark: sizes {', '.join(human(s) for s in sizes)}, {args.rounds} rounds, chunk {args.chunk}, "
        f"{args.threads} parallel chunks, gunicorn 2 workers x 4 threads, disk of {base}",
        flush=True,
    )
    results = {
        size: bench_size(size, args.rounds, args.warmup, parse_size(args.chunk), args.threads, base) for size in sizes
    }
    print()
    print("medians of the timed rounds (best in brackets)")
    print(f"{'size':>9} {'upload MiB/s':>18} {'cp MiB/s':>16} {'ratio':>6} {'server peak RSS':>16}")
    for size, r in results.items():
        print(
            f"{human(size):>9} {r['upload']:8.0f} ({r['upload_best']:6.0f}) {r['cp']:7.0f} ({r['cp_best']:6.0f}) "
            f"{r['upload'] / r['cp']:6.2f} {r['rss_mb']:13.0f} MB"
        )
    print(
        "goals: ratio >= 0.5; peak RSS < 200 MB and flat with file size"
        + ("" if all(r["reset"] for r in results.values()) else " (peak includes start-up: VmHWM reset unsupported)")
    )


if __name__ == "__main__":
    main()
