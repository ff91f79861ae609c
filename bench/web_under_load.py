"""The web tier under slow clients: another user's `GET /api/v1/jobs` latency while N slow connections are held.

    .venv/bin/python bench/web_under_load.py                      # N = 0, 64, 512; 200 calls each
    .venv/bin/python bench/web_under_load.py --held 0 512 --calls 400 --worker-class gthread

It starts a portal as `make run` does (bench/upload.py's Portal: gunicorn with portal/gunicorn_conf.py, DEBUG
off, the embedded defaults, a private var directory), then for each N holds N connections that send a request
line and then one header every 2 s and never finish (a slowloris; one cut by the header deadline is opened
again at once), and times bob's calls one after another. It prints p50/p95/max per N, the p95 against the
quiet one (goal at 512: <= 2x), and the web workers' RSS per held connection. `--worker-class gthread` runs
the same against the threaded workers the portal used before (4 threads a process; set through
GUNICORN_CMD_ARGS), where a held connection takes a thread: there, calls time out once N reaches the
threads. Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.upload import Portal  # noqa: E402

PASSWORD = "bench-password-1"  # noqa: S105  # the throwaway account of a throwaway portal


class Dribblers:
    """`count` connections that never finish their request; each cut one is replaced."""

    def __init__(self, url: str, count: int) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.address = (host, int(port))
        self.count = count
        self.socks: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _open(self) -> socket.socket:
        sock = socket.create_connection(self.address, timeout=10)
        sock.sendall(b"GET /api/v1/version HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        return sock

    def _run(self) -> None:
        while not self.stop.wait(2):
            for index, sock in enumerate(self.socks):
                try:
                    sock.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    sock.close()
                    with contextlib.suppress(OSError):
                        self.socks[index] = self._open()

    def __enter__(self) -> Dribblers:
        self.socks = [self._open() for _ in range(self.count)]
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)
        for sock in self.socks:
            sock.close()


def timed_calls(url: str, token: str, calls: int) -> list[float]:
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    times = []
    for _ in range(calls):
        began = time.perf_counter()
        try:
            session.get(f"{url}/api/v1/jobs", timeout=15).raise_for_status()
            times.append(time.perf_counter() - began)
        except requests.RequestException:
            times.append(float("inf"))  # timed out or refused: the tier did not answer
    return times


def rss_kib(pids: list[int]) -> int:
    return sum(psutil.Process(pid).memory_info().rss for pid in pids) // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held", type=int, nargs="+", default=[0, 64, 512])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--worker-class", choices=["gevent", "gthread"], default="gevent")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4096)), hard))

    with tempfile.TemporaryDirectory(prefix="paddlecloud-web-load-") as workdir:
        portal = Portal(Path(workdir))
        if args.worker_class == "gthread":
            portal.env["GUNICORN_CMD_ARGS"] = "--worker-class gthread --threads 4"
        portal.start("bob", PASSWORD)
        try:
            token = requests.post(
                f"{portal.url}/api/v1/auth/token", json={"username": "bob", "password": PASSWORD}, timeout=30
            ).json()["token"]
            timed_calls(portal.url, token, 20)  # warm-up: imports, first queries
            print(f"web tier: {args.worker_class} workers (portal/gunicorn_conf.py), {args.calls} calls of "
                  "bob's GET /api/v1/jobs per row, one after another")  # fmt: skip
            quiet_p95 = None
            for held in args.held:
                before = rss_kib(portal.worker_pids())
                with Dribblers(portal.url, held):
                    time.sleep(1)  # every connection accepted and parsing
                    during = rss_kib(portal.worker_pids())
                    times = sorted(timed_calls(portal.url, token, args.calls))
                p95 = times[int(0.95 * (len(times) - 1))]
                quiet_p95 = quiet_p95 if quiet_p95 is not None else p95
                failed = sum(1 for t in times if t == float("inf"))
                per_connection = f"{(during - before) / held:.0f} KiB" if held else "-"
                print(
                    f"  held {held:4d}: p50 {statistics.median(times) * 1000:8.1f} ms  p95 {p95 * 1000:8.1f} ms  "
                    f"max {times[-1] * 1000:8.1f} ms  p95/quiet {p95 / quiet_p95:6.2f}x  timed out {failed}  "
                    f"RSS {before // 1024}->{during // 1024} MiB ({per_connection} a held connection)"
                )
        finally:
            portal.stop()


if __name__ == "__main__":
    main()
