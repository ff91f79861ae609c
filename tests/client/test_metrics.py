"""paddlecloud.metrics.log: JSON lines in the worker's folder, buffered, bounded, never raising into training."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from paddlecloud.runtime import metrics

from tests.wait import wait_for


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_job_process_writes_into_its_worker_folder() -> None:
    env = {"PADDLECLOUD_OUTPUT_DIR": "/pfs/dc/home/u/jobs/fit/output/fit-x", "PADDLECLOUD_ROLE": "trainer",
           "PADDLECLOUD_INDEX": "1"}
    assert metrics.default_path(env) == Path("/pfs/dc/home/u/jobs/fit/output/fit-x/trainer_1/metrics.jsonl")


def test_outside_a_job_it_writes_to_the_named_file_or_the_current_folder() -> None:
    assert metrics.default_path({"PADDLECLOUD_METRICS_FILE": "/tmp/m.jsonl"}) == Path("/tmp/m.jsonl")
    assert metrics.default_path({}) == Path("metrics.jsonl")


def test_lines_are_written_at_flush_with_step_time_and_values(tmp_path: Path) -> None:
    writer = metrics.MetricsWriter(tmp_path / "w" / "metrics.jsonl", flush_seconds=60)
    writer.log(3, {"loss": 0.5, "acc": 1})
    assert not (tmp_path / "w").exists()  # buffered, not one write per call
    writer.flush()
    (line,) = lines(tmp_path / "w" / "metrics.jsonl")
    assert line["step"] == 3 and line["values"] == {"loss": 0.5, "acc": 1}
    assert abs(float(line["time"]) - time.time()) < 5  # type: ignore[arg-type]


def test_the_thread_flushes_within_a_second_without_more_calls(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    writer = metrics.MetricsWriter(path, flush_seconds=0.2)
    writer.log(1, {"loss": 2.0})
    deadline = time.monotonic() + 3
    # the file exists from open("a") on, a moment before its line is written: wait for the line itself
    while not (path.exists() and path.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [line["values"] for line in lines(path)] == [{"loss": 2.0}]


@pytest.mark.parametrize(
    ("step", "values"),
    [
        (-1, {"loss": 1.0}),
        (1.5, {"loss": 1.0}),
        (True, {"loss": 1.0}),
        (2**53, {"loss": 1.0}),
        (1, {"loss": math.nan}),
        (1, {"loss": math.inf}),
        (1, {"loss": "0.5"}),
        (1, {"loss": True}),
        (1, {"x" * 65: 1.0}),
        (1, {"bad\nname": 1.0}),
        (1, {}),
    ],
)
def test_bad_steps_names_and_values_are_dropped_with_a_warning_not_raised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], step: object, values: dict[str, object]
) -> None:
    path = tmp_path / "metrics.jsonl"
    writer = metrics.MetricsWriter(path, flush_seconds=60)
    writer.log(step, values)
    writer.flush()
    assert not path.exists()
    if values:
        assert "paddlecloud.metrics" in capsys.readouterr().err


def test_good_values_of_a_call_are_kept_when_one_is_bad(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    writer = metrics.MetricsWriter(path, flush_seconds=60)
    writer.log(1, {"loss": 0.25, "lr": math.nan})
    writer.flush()
    assert [line["values"] for line in lines(path)] == [{"loss": 0.25}]


def test_a_folder_that_cannot_be_written_warns_once_and_never_raises(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    writer = metrics.MetricsWriter(blocker / "sub" / "metrics.jsonl", flush_seconds=60)
    for step in range(3):
        writer.log(step, {"loss": 1.0})
        writer.flush()
    assert capsys.readouterr().err.count("cannot write") == 1


def test_the_buffer_is_bounded(tmp_path: Path) -> None:
    writer = metrics.MetricsWriter(tmp_path / "m.jsonl", flush_seconds=3600)
    writer._thread = object()  # type: ignore[assignment]  # no writer thread: the buffer only grows
    for step in range(metrics.MAX_BUFFERED + 50):
        writer.log(step, {"loss": 1.0})
    assert len(writer._lines) == metrics.MAX_BUFFERED


def test_a_process_that_exits_right_after_logging_keeps_its_lines(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    code = "from paddlecloud import metrics\nfor s in range(100): metrics.log(step=s, loss=1.0 / (s + 1))\n"
    subprocess.run([sys.executable, "-c", code], env={"PADDLECLOUD_METRICS_FILE": str(path)}, check=True, timeout=60)
    assert [line["step"] for line in lines(path)] == list(range(100))


def test_outside_a_job_it_writes_metrics_jsonl_in_the_current_folder(tmp_path: Path) -> None:
    code = "from paddlecloud import metrics\nmetrics.log(step=0, loss=1.5)\n"
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={}, check=True, timeout=60)
    assert lines(tmp_path / "metrics.jsonl")[0]["values"] == {"loss": 1.5}



def test_a_flush_waits_for_the_write_another_flush_has_begun(tmp_path: Path) -> None:
    """atexit's flush must not return while the thread still writes lines it took (they would be lost)."""
    fifo = tmp_path / "metrics.jsonl"
    os.mkfifo(fifo)  # opening it to append blocks until a reader comes: a write held half-way, for real
    writer = metrics.MetricsWriter(fifo, flush_seconds=3600)
    writer._thread = object()  # type: ignore[assignment]  # no writer thread: the flushes below are the test's
    writer.log(0, {"loss": 1.0})
    first = threading.Thread(target=writer.flush, daemon=True)  # daemons: a failing run never hangs pytest
    first.start()  # takes the line, then blocks opening the FIFO
    wait_for(lambda: not writer._lines, "the first flush to take the buffered line", 10)
    last = threading.Thread(target=writer.flush, daemon=True)  # what atexit does
    last.start()
    last.join(0.5)
    assert last.is_alive(), "the last flush returned while the first one still held lines"
    with fifo.open(encoding="utf-8") as reader:  # let the first write go through
        assert json.loads(reader.readline())["values"] == {"loss": 1.0}
    first.join(10)
    last.join(10)
    assert not first.is_alive() and not last.is_alive()


def test_a_total_is_written_with_its_step_even_without_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    writer = metrics.MetricsWriter(tmp_path / "metrics.jsonl", flush_seconds=60)
    writer.log(3, {"loss": 0.5}, total_steps=100)
    writer.log(4, {}, total_steps=100)  # progress alone
    writer.log(5, {"loss": 0.4}, total_steps=0)  # a bad total is dropped, the values kept
    writer.log(6, {}, total_steps=-1)  # nothing left to write
    writer.flush()
    written = [(line["step"], line.get("total_steps"), line["values"]) for line in lines(tmp_path / "metrics.jsonl")]
    assert written == [(3, 100, {"loss": 0.5}), (4, 100, {}), (5, None, {"loss": 0.4})]
    assert capsys.readouterr().err.count("total_steps must be a whole number from 1") == 1  # said once
