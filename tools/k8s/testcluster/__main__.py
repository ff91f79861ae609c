"""`python -m tools.k8s.testcluster up [--node] [--kueue] | down | status`: a test cluster that outlives the command."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tools.k8s.bin_dirs import default_bin_dir
from tools.k8s.testcluster.cluster import TestCluster, missing_binaries
from tools.k8s.testcluster.kueue import kueue_missing
from tools.k8s.testcluster.node import NodeRunner, node_missing
from tools.k8s.testcluster.node_config import RealNode
from tools.k8s.testcluster.processes import kill_group, pid_is


def state_dir() -> Path:
    """Where `up` keeps the cluster's files and state.json: ${PADDLECLOUD_VAR_DIR:-./var}/k8s."""
    return Path(os.environ.get("PADDLECLOUD_VAR_DIR") or "var").resolve() / "k8s"


def read_state() -> dict[str, Any] | None:
    path = state_dir() / "state.json"
    return json.loads(path.read_text()) if path.exists() else None


def down(_: argparse.Namespace | None = None) -> int:
    state = read_state()
    if state is None:
        print("no test cluster state in", state_dir())
        return 0
    components = state["components"]
    runner = None
    if state.get("node"):
        runner = NodeRunner.restore(state["node"], Path(state["kubeconfig"]), state["context"])
    if runner and "kubelet" in components and pid_is(components["kubelet"]["pid"], components["kubelet"]["exe"]):
        kill_group(components["kubelet"]["pid"])
        print(f"stopped kubelet (pid {components['kubelet']['pid']})")
    if (
        runner
        and "containerd" in components
        and pid_is(components["containerd"]["pid"], components["containerd"]["exe"])
    ):
        runner.remove_containers()
    for name, info in reversed(list(components.items())):
        if pid_is(info["pid"], info["exe"]):
            kill_group(info["pid"])
            print(f"stopped {name} (pid {info['pid']})")
    if runner:
        runner.cleanup_host()
        print(f"removed node {state['node']['name']}: containers, mounts, bridge {state['node']['bridge']}")
    (state_dir() / "state.json").unlink()
    return 0


def status(_: argparse.Namespace | None = None) -> int:
    state = read_state()
    if state is None:
        print("test cluster is down (no state in", state_dir(), ")")
        return 1
    alive = True
    for name, info in state["components"].items():
        up = pid_is(info["pid"], info["exe"])
        alive &= up
        print(f"{name:24} pid {info['pid']:>7}  {'running' if up else 'NOT RUNNING'}")
    print(f"server     {state['server']}\nkubeconfig {state['kubeconfig']}")
    if state.get("node"):
        print(f"real node  {state['node']['name']} (bridge {state['node']['bridge']})")
    return 0 if alive else 1


def up(args: argparse.Namespace) -> int:
    state = read_state()
    if state is not None:
        if all(pid_is(i["pid"], i["exe"]) for i in state["components"].values()):
            print(f"test cluster already running\nexport KUBECONFIG={state['kubeconfig']}")
            return 0
        down()  # half-dead leftovers: clean up and start over
    bin_dir = default_bin_dir()
    if missing_binaries(bin_dir):
        print(f"k8s control plane binaries not found in {bin_dir}: run `make k8s-build` (tools/k8s/build.sh)")
        return 1
    node = None
    if args.node:
        missing = node_missing()
        if missing:
            print(f"a real node needs: {', '.join(missing)} (run `sudo make k8s-build`, then `sudo make k8s-up-node`)")
            return 1
        node = RealNode()
    if args.kueue and kueue_missing():
        print(f"Kueue needs: {', '.join(kueue_missing())} (run tools/k8s/build-kueue.sh)")
        return 1
    cluster = TestCluster(bin_dir, state_dir() / "cluster", die_with_parent=False, node=node, kueue=args.kueue)
    started = time.monotonic()
    cluster.start(timeout=300 if node else 120)
    cluster.detach()
    new_state: dict[str, Any] = {
        "server": cluster.server,
        "kubeconfig": str(cluster.kubeconfig_path),
        "context": cluster.context,
        "ca_file": str(cluster.ca_file),
        "work_dir": str(cluster.work_dir),
        "components": {n: {"pid": p.pid, "exe": str(cluster.exes[n])} for n, p in cluster.procs.items()},
        "node": cluster.node_runner.state() if cluster.node_runner else None,
    }
    (state_dir() / "state.json").write_text(json.dumps(new_state, indent=2))
    print(f"test cluster up in {time.monotonic() - started:.1f}s at {cluster.server} (logs: {cluster.log_dir})")
    if cluster.node_runner:
        runner = cluster.node_runner
        print(f"real node {runner.node.name} Ready; runtime image {runner.images['runtime']['ref']}")
    print(f"export KUBECONFIG={cluster.kubeconfig_path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: up [--node] [--kueue] | down | status."""
    parser = argparse.ArgumentParser(prog="python -m tools.k8s.testcluster", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    up_parser = sub.add_parser("up", help="start the control plane and the kwok nodes, print `export KUBECONFIG=`")
    up_parser.add_argument("--node", action="store_true", help="also a real node: containerd, CNI, CoreDNS, kubelet")
    up_parser.add_argument("--kueue", action="store_true", help="also JobSet's controller and Kueue (build-kueue.sh)")
    up_parser.set_defaults(func=up)
    sub.add_parser("down", help="stop everything `up` started").set_defaults(func=down)
    sub.add_parser("status", help="pids and server; exit 1 unless all run").set_defaults(func=status)
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
