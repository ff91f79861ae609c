""".ci/run's phases: its summary adds up to the wall time, and a phase past its budget ends CI with a message saying
so (not the runner's time-out). Run on a copy of the script beside a Makefile whose `test` only sleeps."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def ci_run(tmp_path: Path, test_seconds: float, budget: int, total: int = 5400) -> subprocess.CompletedProcess[str]:
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    (tmp_path / "Makefile").write_text(f"test:\n\tsleep {test_seconds}\n")
    unset = ("CI", "PADDLECLOUD_CI_SERVICES", "PADDLECLOUD_CI_TEST_BUDGET")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env["PADDLECLOUD_CI_BUDGET"] = str(total)
    if budget:
        env["PADDLECLOUD_CI_TEST_BUDGET"] = str(budget)
    return subprocess.run(
        ["bash", ".ci/run"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )  # fmt: skip


def phases(output: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"^  (\S[^\n]*?)\s+(\d+)s  \(", output, re.M)}


def test_the_summary_names_each_phase_and_they_add_up_to_the_total(tmp_path: Path) -> None:
    result = ci_run(tmp_path, 2, budget=60)
    assert result.returncode == 0, result.stdout + result.stderr
    found = phases(result.stdout)
    assert list(found) == ["make-test"]
    assert 2 <= found["make-test"] <= 10
    total = int(re.search(r"^CI finished in (\d+)s \(exit 0\)$", result.stdout, re.M)[1])  # type: ignore[index]
    assert abs(total - sum(found.values())) <= 1, result.stdout
    # The cores busy meanwhile (the whole machine's, so bounded only by its core count).
    busy = re.search(r"^  make-test .*\), (\d+\.\d) of (\d+) cores busy$", result.stdout, re.M)
    assert busy and float(busy[1]) <= int(busy[2]) == os.cpu_count(), result.stdout


def test_a_phase_past_its_budget_fails_ci_with_a_message_naming_it(tmp_path: Path) -> None:
    result = ci_run(tmp_path, 30, budget=2)
    assert result.returncode == 124, result.stdout + result.stderr
    assert "CI phase 'make-test' ran past its budget of 2s" in result.stderr
    assert "make-test (stopped here)" in result.stdout
    assert re.search(r"^CI finished in \d+s \(exit 124\)$", result.stdout, re.M)


def test_by_default_the_tests_get_what_is_left_of_cis_whole_budget(tmp_path: Path) -> None:
    result = ci_run(tmp_path, 30, budget=0, total=63)  # 63 s in all, less the summary's minute: 3 s (2 if slow)
    assert result.returncode == 124, result.stdout + result.stderr
    assert re.search(r"CI phase 'make-test' ran past its budget of [23]s", result.stderr), result.stderr
