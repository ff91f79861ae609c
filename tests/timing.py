"""Where the suite's time goes: seconds per test group (a folder under tests/) and per xdist worker, after the run.

CI prints the 30 slowest tests (--durations), which name the next test to make faster but not where the run's
time goes as a whole; this summary does (issue 36: "each test group"). A worker's busy seconds below the run's
wall time are time it waited for the others at the end. Printed when the run is asked for durations (CI).
"""

from __future__ import annotations

from collections import defaultdict

import pytest

_group_seconds: dict[str, float] = defaultdict(float)
_group_tests: dict[str, set[str]] = defaultdict(set)
_worker_seconds: dict[str, float] = defaultdict(float)


def group_of(nodeid: str) -> str:
    """`tests/jobs/test_x.py::test_y` -> `tests/jobs`; a test module at the top is its own group."""
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else path


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # On the xdist controller the reports of every worker pass here, each with the worker's node.
    group = group_of(report.nodeid)
    _group_seconds[group] += report.duration
    _group_tests[group].add(report.nodeid)
    node = getattr(report, "node", None)
    worker = getattr(getattr(node, "gateway", None), "id", None) or "main"
    _worker_seconds[worker] += report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if not config.getoption("durations", None) or not _group_seconds:
        return
    write = terminalreporter.write_line
    terminalreporter.section("time per test group (setup + call + teardown, summed over workers)")
    total = sum(_group_seconds.values())
    for group, seconds in sorted(_group_seconds.items(), key=lambda item: -item[1]):
        share = 100 * seconds / total if total else 0.0
        write(f"{seconds:9.1f}s {share:5.1f}%  {len(_group_tests[group]):5d} tests  {group}")
    write(f"{total:9.1f}s in all")
    for worker, seconds in sorted(_worker_seconds.items()):
        write(f"worker {worker}: busy {seconds:.1f}s")
