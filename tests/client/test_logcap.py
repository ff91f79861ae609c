"""A worker's log.txt stays under PADDLECLOUD_LOG_LIMIT while a job floods it: head, marker, end, times intact."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from paddlecloud.contract import logcap, logtimes

from .conftest import LAUNCHER, base_facts, launch_env

LIMIT = 1024 * 1024
# What the file may hold past the limit at any moment: one pump read (64 KiB) and the marker line.
SLACK = 64 * 1024 + 120
MARKER = re.compile(rb"\[paddlecloud\] dropped ([0-9]+) bytes of output here \(log limit 1\.0 MiB\)\n")


def flood(kibibytes: int) -> str:
    """An entry printing `kibibytes` KiB of numbered lines as fast as it can."""
    code = (
        "import sys\n"
        "w = sys.stdout.buffer.write\n"
        f"for i in range({kibibytes} * 1024 // 64):\n"
        "    w(b'line %08d ' % i + b'x' * 49 + b'\\n')\n"
    )
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


def run_watched(facts: dict[str, str], stdout: Path) -> int:
    """Run the launcher (its stdout, the whole stream, to a file); the largest log size seen while it ran."""
    log = Path(facts["PADDLECLOUD_OUTPUT_DIR"]) / "trainer_0" / "log.txt"
    largest = 0
    done = threading.Event()

    def watch() -> None:
        nonlocal largest
        while not done.is_set():
            with contextlib.suppress(FileNotFoundError):
                largest = max(largest, log.stat().st_size)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        with stdout.open("ab") as out:
            subprocess.run(
                LAUNCHER, env=launch_env(facts), stdout=out, stderr=subprocess.DEVNULL, timeout=300, check=True
            )
    finally:
        done.set()
        watcher.join(5)
    return max(largest, log.stat().st_size)


def assert_head_marker_end(log: bytes, stream: bytes) -> int:
    """log is the stream's head, one marker naming what was dropped, and the stream's end; returns the count."""
    head = LIMIT // 2
    found = MARKER.search(log, head)
    assert found is not None and found.start() == head, log[head : head + 200]
    dropped = int(found.group(1))
    tail = log[found.end() :]
    assert log[:head] == stream[:head]
    assert stream.endswith(tail) and len(tail) > 100_000
    assert dropped == len(stream) - head - len(tail)
    return dropped


def times_of(folder: Path, log: bytes) -> list[float | None]:
    with (folder / logtimes.TIMES_NAME).open("rb") as index:
        return logtimes.times_at(index, logtimes.line_starts(log, 0))


@pytest.fixture
def capped(tmp_path: Path) -> dict[str, str]:
    return base_facts(tmp_path, PADDLECLOUD_LOG_LIMIT=str(LIMIT), PADDLECLOUD_ENTRY=flood(40 * 1024))


def test_a_flooding_entry_leaves_at_most_the_limit_with_head_end_and_the_dropped_count(
    capped: dict[str, str], tmp_path: Path
) -> None:
    largest = run_watched(capped, tmp_path / "stdout")
    folder = tmp_path / "output" / "trainer_0"
    log, stream = (folder / "log.txt").read_bytes(), (tmp_path / "stdout").read_bytes()
    assert len(stream) > 40 * 1024 * 1024
    assert largest <= LIMIT + SLACK, largest
    assert len(log) <= LIMIT + SLACK
    assert log.startswith(b"=== attempt started") and b"line 00000000 " in log[:100_000]
    assert log.rstrip().splitlines()[-1].startswith(b"[paddlecloud-launch] entry exited with code 0")
    dropped = assert_head_marker_end(log, stream)
    assert dropped > 38 * 1024 * 1024
    times = times_of(folder, log)
    assert len(times) == log.count(b"\n") and all(when is not None for when in times)


def test_a_restarted_attempt_keeps_counting_what_was_dropped(capped: dict[str, str], tmp_path: Path) -> None:
    run_watched(capped, tmp_path / "stdout")
    capped["PADDLECLOUD_ENTRY"] = flood(100)
    largest = run_watched(capped, tmp_path / "stdout")
    log = (tmp_path / "output" / "trainer_0" / "log.txt").read_bytes()
    assert largest <= LIMIT + SLACK
    assert log.count(b"=== attempt started") == 2  # the first run's in the head, the second's in the end
    assert assert_head_marker_end(log, (tmp_path / "stdout").read_bytes()) > 39 * 1024 * 1024


def test_without_a_limit_nothing_is_dropped(tmp_path: Path) -> None:
    facts = base_facts(tmp_path, PADDLECLOUD_ENTRY=flood(2 * 1024))
    run_watched(facts, tmp_path / "stdout")
    log = (tmp_path / "output" / "trainer_0" / "log.txt").read_bytes()
    assert log == (tmp_path / "stdout").read_bytes() and MARKER.search(log) is None


def test_splicing_moves_the_times_with_their_bytes(tmp_path: Path) -> None:
    now = [0.0]
    with (tmp_path / "log.txt").open("w+b", buffering=0) as log, (tmp_path / "log.times").open("a+b") as index:
        recorder = logtimes.Recorder(index, 0, lambda: now[0], min_gap=0)
        capped = logcap.CappedLog(log, recorder, logcap.MIN_LIMIT)
        for number in range(3000):
            now[0] = 1000.0 + number
            capped.write(b"%05d %s\n" % (number, b"y" * 40))
        index.flush()
    text = (tmp_path / "log.txt").read_bytes()
    with io.BytesIO((tmp_path / "log.times").read_bytes()) as records:
        times = logtimes.times_at(records, logtimes.line_starts(text, 0))
    assert len(text) <= logcap.MIN_LIMIT and b"[paddlecloud] dropped" in text
    numbered = [(line, when) for line, when in zip(text.splitlines(), times, strict=True) if line[:5].isdigit()]
    assert numbered[-1][0].startswith(b"02999 ") and len(numbered) > 500
    for line, when in numbered:
        assert when == 1000 + int(line[:5]), (line, when)
