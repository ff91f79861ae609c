"""CI's background build in parts (.ci/build-k8s.sh, tests/background_build.py): each part's status is written when it
ends, a test waits only for the part it needs, and a part that failed fails the tests waiting for it with the log.
The build runs on a copy of the script beside stand-ins for tools/k8s/build.sh and images.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from tests import background_build
from tests.conftest import _BuiltTestsOnWorkersOfTheirOwn
from tests.k8s.conftest import collection_key

ROOT = Path(__file__).resolve().parents[2]


# What each stand-in step writes to `priorities`: its niceness, and its session's (autogroup) where the kernel has one.
RECORD_PRIORITY = "echo \"$(nice) $(awk '{print $NF}' /proc/self/autogroup 2>/dev/null)\" >> priorities\n"


def build(tmp_path: Path, node_exit: int) -> tuple[int, Path]:
    """The background build with a control plane that builds and a node that exits `node_exit`."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "build-k8s.sh", tmp_path / ".ci" / "build-k8s.sh")
    tools = tmp_path / "tools" / "k8s"
    tools.mkdir(parents=True)
    (tools / "build.sh").write_text(f'{RECORD_PRIORITY}[ "${{1:-}}" = --control-plane ] && exit 0\nexit {node_exit}\n')
    (tools / "images.py").write_text(f"import subprocess\nsubprocess.run(['sh', '-c', {RECORD_PRIORITY!r}])\n")
    status = tmp_path / "var" / "k8s-build.status"
    status.parent.mkdir()
    result = subprocess.run(  # in a session of its own, as .ci/run starts it: its steps set that session's priority
        ["bash", ".ci/build-k8s.sh", str(status), str(tmp_path / "times")],
        cwd=tmp_path,
        timeout=60,
        check=False,
        start_new_session=True,
    )
    return result.returncode, status


def test_each_part_writes_its_status_and_the_whole_build_its_own_last(tmp_path: Path) -> None:
    code, status = build(tmp_path, node_exit=0)
    assert code == 0
    assert {p: Path(f"{status}.{p}").read_text().strip() for p in background_build.PARTS} == dict.fromkeys(
        background_build.PARTS, "0"
    )
    assert status.read_text().strip() == "0"
    steps = [line.split()[0] for line in (tmp_path / "times").read_text().splitlines()]
    assert steps == ["k8s-control-plane", "k8s-node", "images-builder", "images-portal", "images-services"]


@pytest.mark.skipif(os.geteuid() != 0, reason="a negative niceness needs root (CI runs as root)")
def test_the_go_builds_weigh_three_times_a_tests_session_and_the_images_as_much(tmp_path: Path) -> None:
    """The kernel shares the CPU between sessions first (autogroups): a niced process only yields to its own
    session's, so the steps set their session's niceness too, where the kernel has autogroups."""
    own_session = Path("/proc/self/autogroup").read_text() if Path("/proc/self/autogroup").exists() else None
    code, _ = build(tmp_path, node_exit=0)
    assert code == 0
    recorded = [line.split() for line in (tmp_path / "priorities").read_text().splitlines()]
    expected = ["-5", "-5", "-5", "0", "0"]  # control plane, node, Kaniko; the portal's and services' images
    assert [fields[0] for fields in recorded] == expected
    if own_session is not None:
        assert [fields[1] for fields in recorded] == expected
        assert Path("/proc/self/autogroup").read_text() == own_session  # the test's own session is left alone


def test_a_failed_node_fails_its_tests_with_the_log_and_leaves_the_control_planes_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, status = build(tmp_path, node_exit=3)
    assert code == 3 and status.read_text().strip() == "3"
    assert not Path(f"{status}.images").exists()
    status.with_suffix(".log").write_text("the node's build said why\n")
    monkeypatch.setenv("PADDLECLOUD_K8S_BUILD_STATUS", str(status))
    background_build.wait("control-plane")  # built: returns at once
    for part in ("node", "images"):
        with pytest.raises(pytest.fail.Exception, match=r"(?s)failed \(exit 3\).*the node's build said why"):
            background_build.wait(part)


def test_a_test_waits_for_its_own_part_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    status = tmp_path / "k8s-build.status"
    monkeypatch.setenv("PADDLECLOUD_K8S_BUILD_STATUS", str(status))
    Path(f"{status}.control-plane").write_text("0\n")
    assert background_build.running()
    background_build.wait("control-plane")  # the node still builds: no wait
    threading.Timer(1.0, lambda: Path(f"{status}.node").write_text("0\n")).start()
    started = time.monotonic()
    background_build.wait("node")
    assert 0.9 <= time.monotonic() - started <= 10
    monkeypatch.setenv("PADDLECLOUD_K8S_BUILD_WAIT", "0")
    with pytest.raises(pytest.fail.Exception, match="did not finish its images part in time"):
        background_build.wait("images")


def test_the_control_planes_tests_and_the_nodes_are_two_units_in_the_order_their_parts_end() -> None:
    assert background_build.unit_of("tests/k8s/test_kueue_queue.py::test_x") == "built:control-plane"
    assert background_build.unit_of("tests/k8s/test_pods.py::test_x") == "built:node"
    assert background_build.unit_of("tests/k8s/test_deploy_job.py::test_x") == "built:node"
    assert background_build.unit_of("tests/cli/test_build.py::test_x") == "built:node"
    assert not background_build.needs_build("tests/cli/test_paddle.py::test_x")
    order = [
        background_build.order_key(f"tests/{name}::t")
        for name in ("jobs/test_x.py", "k8s/test_watch.py", "k8s/test_pods.py", "k8s/test_deploy_pods.py")
    ]
    assert order == sorted(order) and len(set(order)) == 4
    for listed in background_build.NEEDS_NODE + background_build.NEEDS_IMAGES:
        assert (ROOT / listed).is_file(), listed  # a renamed file would silently fall back to the control plane's unit


class _Worker:
    """What the scheduler asks of a pytest-xdist worker here: the indexes of the tests it is sent."""

    def __init__(self) -> None:
        self.sent: list[list[int]] = []

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.append(indexes)


def test_a_built_unit_goes_to_a_worker_without_one_as_soon_as_its_part_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pytestconfig: pytest.Config
) -> None:
    """Sent in collection order (last, while CI builds), the node's unit ran alone at the end of a warm CI run."""
    status = tmp_path / "k8s-build.status"
    monkeypatch.setenv("PADDLECLOUD_K8S_BUILD_STATUS", str(status))
    collection = [*(f"tests/jobs/test_a.py::t{n}" for n in (1, 2, 3)),
                  *(f"tests/k8s/{name}.py::t" for name in ("test_watch", "test_pods", "test_deploy_pods"))]  # fmt: skip
    monkeypatch.setattr("xdist.scheduler.loadscope.parse_tx_spec_config", lambda config: ["popen", "popen"])
    scheduler = _BuiltTestsOnWorkersOfTheirOwn(pytestconfig, None)
    first, second = _Worker(), _Worker()
    for worker in (first, second):
        scheduler.assigned_work[worker] = {}
        scheduler.registered_collections[worker] = collection
    scheduler.workqueue = OrderedDict()
    for nodeid in collection:
        scheduler.workqueue.setdefault(scheduler._split_scope(nodeid), {})[nodeid] = False

    scheduler._assign_work_unit(first)  # nothing built yet: the queue's order
    Path(f"{status}.control-plane").write_text("0\n")
    scheduler._assign_work_unit(first)  # the control plane's unit, before the other tests
    Path(f"{status}.node").write_text("0\n")
    scheduler._assign_work_unit(first)  # it holds a built unit: the node's goes to another worker
    scheduler._assign_work_unit(second)
    assert first.sent == [[0], [3], [1]]
    assert second.sent == [[4, 5]]  # the node's tests, in the order their parts end


@pytest.mark.parametrize("building", [True, False])
def test_a_units_tests_from_outside_tests_k8s_come_before_its_tests_in_tests_k8s(building: bool) -> None:
    """The clusters are package-scoped (stopped when a worker's next test is outside tests/k8s): a unit whose tests
    went k8s, cli, k8s (pytest-django's order by database use) started the node's cluster twice."""
    nodeids = [
        "tests/k8s/test_pods.py::test_a",  # the node's part
        "tests/cli/test_build.py::test_b",  # the node's part, outside tests/k8s
        "tests/k8s/test_registry.py::test_c",  # the node's part
        "tests/k8s/test_watch.py::test_d",  # the control plane's part
        "tests/core/test_locks.py::test_e",  # no part
        "tests/k8s/test_deploy_pods.py::test_f",  # the images' part
    ]
    # What the key reads of a pytest.Item: its node id and path.
    items = [cast(pytest.Item, SimpleNamespace(nodeid=nodeid, path=ROOT / nodeid.split("::")[0])) for nodeid in nodeids]
    ordered = [item.nodeid.split("::")[1] for item in sorted(items, key=lambda item: collection_key(item, building))]
    built = ["test_d", "test_b", "test_a", "test_c", "test_f"]
    assert ordered == (["test_e", *built] if building else [*built, "test_e"])
