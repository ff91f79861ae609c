"""The suite's time per test group and per worker (tests/timing.py), printed with --durations as on CI."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_each_groups_seconds_and_tests_are_summed_and_the_workers_busy_time_follows(tmp_path: Path) -> None:
    for group, seconds in {"slow": 0.6, "quick": 0.0}.items():
        (tmp_path / "tests" / group).mkdir(parents=True)
        (tmp_path / "tests" / group / f"test_{group}.py").write_text(
            "import time\n" + "".join(f"def test_{i}():\n    time.sleep({seconds})\n" for i in range(2))
        )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.timing", "-p", "no:cacheprovider", "-p", "no:randomly",
         "-n", "2", "--durations=1", "--rootdir", str(tmp_path), str(tmp_path / "tests")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    rows = {m[3]: (float(m[1]), int(m[2])) for m in re.finditer(r"^ +([\d.]+)s +[\d.]+%  +(\d+) tests  (\S+)$",
                                                                 run.stdout, re.M)}  # fmt: skip
    assert rows.keys() == {"tests/slow", "tests/quick"}, run.stdout
    assert rows["tests/slow"][1] == rows["tests/quick"][1] == 2
    assert 1.2 <= rows["tests/slow"][0] < 10 and rows["tests/quick"][0] < 1.0
    busy = dict(re.findall(r"^worker (gw\d): busy ([\d.]+)s$", run.stdout, re.M))
    assert busy.keys() == {"gw0", "gw1"} and 1.2 <= sum(map(float, busy.values())) < 10, run.stdout
