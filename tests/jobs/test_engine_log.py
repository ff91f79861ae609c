"""The local engine's supervisor writes a process's stdout to its log.txt and log.times, under the log limit."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from paddlecloud.contract import logtimes

from jobs.engines.local import processes, sandbox
from tests.jobs.test_sandbox import _pairs, _sandbox

LIMIT = 64 * 1024
FLOOD = "import sys\nfor i in range(20000):\n    sys.stdout.write('line %06d %s\\n' % (i, 'x' * 50))\n"


def _run(tmp_path: Path, script: str) -> None:
    log_fd = os.open(tmp_path / "log.txt", os.O_RDWR | os.O_CREAT, 0o644)
    times_fd = os.open(tmp_path / "log.times", os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    status = tmp_path / "status.json"
    try:
        processes.spawn(
            [sys.executable, "-c", script],
            env={"PATH": os.environ["PATH"]},
            cwd=tmp_path,
            status_path=status,
            stderr_path=tmp_path / "launcher.err",
            log=processes.EngineLog(log_fd, times_fd, LIMIT),
        )
    finally:
        os.close(log_fd)
        os.close(times_fd)
    deadline = time.monotonic() + 30
    while processes.exit_status(status) is None:  # written after the log's last byte
        assert time.monotonic() < deadline, (tmp_path / "launcher.err").read_text()
        time.sleep(0.05)


def test_the_supervisor_writes_its_process_stdout_to_the_log_under_the_limit_with_times(tmp_path: Path) -> None:
    _run(tmp_path, FLOOD)
    log = (tmp_path / "log.txt").read_bytes()
    assert len(log) <= LIMIT + 120 + 65536, len(log)
    assert log.startswith(b"line 000000 ") and log.endswith(b"line 019999 " + b"x" * 50 + b"\n")
    assert b"[paddlecloud] dropped " in log
    with (tmp_path / "log.times").open("rb") as index:
        times = logtimes.times_at(index, [0, len(log) - 62])
    assert all(t is not None and abs(t - time.time()) < 60 for t in times), times
    # A second run (a restarted attempt) appends, and goes on counting what was dropped.
    _run(tmp_path, "print('attempt 2')")
    assert (tmp_path / "log.txt").read_bytes().endswith(b"line 019999 " + b"x" * 50 + b"\nattempt 2\n")


def test_the_logs_are_bound_read_only_from_descriptors_after_the_home() -> None:
    box = _sandbox(root=True)
    sealed = sandbox.Sandbox(**{**box.__dict__, "sealed": ((7, "/pfs/local/home/alice/o/trainer_0/log.txt"),)})
    argv = sandbox.command(sealed, ["true"])
    assert _pairs(argv, "--ro-bind-fd") == [("7", "/pfs/local/home/alice/o/trainer_0/log.txt")]
    assert argv.index("--ro-bind-fd") > argv.index("/pfs/local/home/alice")  # over the read-write home
