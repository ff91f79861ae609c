"""paddlecloud.checkpoint: atomic saves in the output folder, the latest found, old ones pruned, SIGTERM noticed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from paddlecloud import checkpoint


def write_text(text: str):  # type: ignore[no-untyped-def]
    return lambda folder: (folder / "state.txt").write_text(text)


def test_latest_is_none_until_a_save_then_the_highest_step(tmp_path: Path) -> None:
    assert checkpoint.latest(tmp_path) is None
    checkpoint.save(3, write_text("three"), output=tmp_path)
    checkpoint.save(10, write_text("ten"), output=tmp_path)
    last = checkpoint.latest(tmp_path)
    assert last is not None and last.step == 10
    assert (last.path / "state.txt").read_text() == "ten"
    assert last.path == tmp_path / "checkpoints" / "step-10"


def test_only_the_newest_are_kept(tmp_path: Path) -> None:
    for step in range(5):
        checkpoint.save(step, write_text(str(step)), keep=2, output=tmp_path)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-3", "step-4"]


def test_a_save_that_fails_half_way_leaves_the_previous_checkpoint_the_latest(tmp_path: Path) -> None:
    checkpoint.save(1, write_text("good"), output=tmp_path)

    def broken(folder: Path) -> None:
        (folder / "state.txt").write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        checkpoint.save(2, broken, output=tmp_path)
    last = checkpoint.latest(tmp_path)
    assert last is not None and last.step == 1 and (last.path / "state.txt").read_text() == "good"


def test_what_a_killed_save_left_is_ignored_then_swept(tmp_path: Path) -> None:
    stale = tmp_path / "checkpoints" / ".step-7.tmp-999999"
    stale.mkdir(parents=True)
    (tmp_path / "checkpoints" / "step-x").mkdir()  # not a checkpoint name
    assert checkpoint.latest(tmp_path) is None
    checkpoint.save(8, write_text("eight"), output=tmp_path)
    assert not stale.exists()


def test_the_output_folder_comes_from_the_job_and_attempts_from_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PADDLECLOUD_OUTPUT_DIR", str(tmp_path))
    monkeypatch.setenv("PADDLECLOUD_ATTEMPT", "3")
    monkeypatch.setenv("PADDLECLOUD_PREEMPTED", "1")
    assert checkpoint.directory() == tmp_path / "checkpoints"
    assert (checkpoint.attempt(), checkpoint.resumed()) == (3, True)
    monkeypatch.setenv("PADDLECLOUD_ATTEMPT", "junk")
    assert checkpoint.attempt() == 1
    with pytest.raises(ValueError, match="step"):
        checkpoint.save(-1, write_text("x"))


def test_a_training_loop_saves_and_leaves_on_sigterm(tmp_path: Path) -> None:
    """What a preempted job does: SIGTERM sets the flag, the loop saves its step and exits 0 before the SIGKILL."""
    script = textwrap.dedent(
        """
        import sys, time
        from paddlecloud import checkpoint
        step = 1
        checkpoint.latest(sys.argv[1])  # the first use installs the handler
        print("ready", flush=True)
        while not checkpoint.stop_requested():
            step += 1
            time.sleep(0.01)
        checkpoint.save(step, lambda folder: (folder / "step").write_text(str(step)), output=sys.argv[1])
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, env=env)
    assert process.stdout is not None and process.stdout.readline().strip() == b"ready"
    process.send_signal(signal.SIGTERM)
    assert process.wait(10) == 0
    last = checkpoint.latest(tmp_path)
    assert last is not None and (last.path / "step").read_text() == str(last.step) and last.step > 0


def test_the_best_by_the_metric_is_kept_beside_the_newest(tmp_path: Path) -> None:
    for step, loss in enumerate([0.9, 0.2, 0.5, 0.7, 0.6]):
        checkpoint.save(step, write_text(str(step)), keep=1, keep_best=1, metric=loss, output=tmp_path)
    kept = checkpoint.list_all(tmp_path)
    assert [(c.step, c.metric) for c in kept] == [(1, 0.2), (4, 0.6)]  # the best (lowest loss) and the newest
    assert checkpoint.load(1, tmp_path) == kept[0] and checkpoint.load(3, tmp_path) is None
    for step, acc in enumerate([0.1, 0.8, 0.3]):
        checkpoint.save(10 + step, write_text("x"), keep=1, keep_best=1, metric=acc, goal="maximize", output=tmp_path)
    assert [c.step for c in checkpoint.list_all(tmp_path)] == [11, 12]
    for bad in ({"metric": float("nan")}, {"keep_best": -1}, {"goal": "lowest"}):
        with pytest.raises(ValueError):
            checkpoint.save(20, write_text("x"), output=tmp_path, **bad)

