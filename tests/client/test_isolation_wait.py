"""isolation.py and the launcher's wait for the pod's NetworkPolicies: a local listener stands in for the node's
kubelet (listening: the policies are not in force yet; closed: they are). Times are small, never asserted as speeds."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from paddlecloud.contract import exitcodes
from paddlecloud.runtime import isolation

from .conftest import base_facts, run_launcher


@pytest.fixture
def kubelet() -> Iterator[socket.socket]:
    """A listener on 127.0.0.1: the node as a pod sees it before its policies are in force."""
    sock = socket.create_server(("127.0.0.1", 0))
    yield sock
    sock.close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once it is closed: connects are refused


def close_later(sock: socket.socket, seconds: float) -> None:
    threading.Timer(seconds, sock.close).start()


def isolation_facts(tmp_path: Path, port: int, bound: str = "10") -> dict[str, str]:
    marker = tmp_path / "entry-ran"
    return base_facts(
        tmp_path,
        PADDLECLOUD_ENTRY=f"touch {marker}",
        PADDLECLOUD_NODE_IP="127.0.0.1",
        PADDLECLOUD_ISOLATION_PORT=str(port),
        PADDLECLOUD_ISOLATION_TIMEOUT=bound,
    )


def log_of(tmp_path: Path) -> str:
    return (tmp_path / "output" / "trainer_0" / "log.txt").read_text()


def test_an_unreachable_node_means_isolation_is_in_force_at_once() -> None:
    assert isolation.wait_until_isolated("127.0.0.1", closed_port(), bound=5) is None


def test_it_waits_while_the_node_accepts_connections(kubelet: socket.socket) -> None:
    close_later(kubelet, 0.6)
    waited = isolation.wait_until_isolated("127.0.0.1", kubelet.getsockname()[1], bound=30, interval=0.1)
    assert waited is not None and waited > 0


def test_past_its_bound_it_fails_naming_the_node(kubelet: socket.socket) -> None:
    port = kubelet.getsockname()[1]
    with pytest.raises(isolation.IsolationError) as caught:
        isolation.wait_until_isolated("127.0.0.1", port, bound=0.3, interval=0.1)
    assert str(caught.value) == f"network isolation not in force after 0.3 s: 127.0.0.1:{port} still reachable"


def test_the_launcher_runs_the_entry_once_the_node_is_out_of_reach(tmp_path: Path, kubelet: socket.socket) -> None:
    close_later(kubelet, 1.0)
    result = run_launcher(isolation_facts(tmp_path, kubelet.getsockname()[1]))
    assert result.returncode == 0, result.stdout
    assert "network isolation in force after" in log_of(tmp_path)
    assert (tmp_path / "entry-ran").exists()


def test_the_launcher_says_nothing_when_isolation_was_in_force_from_the_start(tmp_path: Path) -> None:
    result = run_launcher(isolation_facts(tmp_path, closed_port()))
    assert result.returncode == 0, result.stdout
    assert "network isolation" not in log_of(tmp_path)
    assert (tmp_path / "entry-ran").exists()


def test_the_launcher_never_runs_the_entry_unisolated(tmp_path: Path, kubelet: socket.socket) -> None:
    port = kubelet.getsockname()[1]
    result = run_launcher(isolation_facts(tmp_path, port, bound="0.5"))
    assert result.returncode == exitcodes.ISOLATION == 73
    last = log_of(tmp_path).splitlines()[-1]
    reason = f"network isolation not in force after 0.5 s: 127.0.0.1:{port} still reachable"
    assert last == f"[paddlecloud-launch] error: {reason}"
    assert not (tmp_path / "entry-ran").exists()


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("PADDLECLOUD_NODE_IP", "", "PADDLECLOUD_NODE_IP is required with PADDLECLOUD_ISOLATION_PORT"),
        ("PADDLECLOUD_ISOLATION_PORT", "70000", "PADDLECLOUD_ISOLATION_PORT: 70000 is not a port number"),
        ("PADDLECLOUD_ISOLATION_TIMEOUT", "0", "PADDLECLOUD_ISOLATION_TIMEOUT=0 must be a finite number > 0"),
    ],
)
def test_bad_isolation_facts_exit_64_naming_the_variable(tmp_path: Path, variable: str, value: str, named: str) -> None:
    facts = isolation_facts(tmp_path, closed_port()) | {variable: value}
    result = run_launcher(facts)
    assert result.returncode == exitcodes.BAD_FACTS
    assert named in result.stderr
