"""Job facts (PADDLECLOUD_* variables) parsed and turned into Paddle's variables, as pure functions."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

Resolver = Callable[[str], str]


class FactsError(ValueError):
    """A job fact is missing or malformed; the message names the variable."""


@dataclass(frozen=True)
class Facts:
    role: str  # "pserver" | "trainer"
    index: int
    trainers: int
    pservers: int  # 0 = collective mode
    pserver_hosts: tuple[str, ...]
    pserver_ports: tuple[int, ...]
    trainer_hosts: tuple[str, ...]
    trainer_ports: tuple[int, ...]
    gloo_port: int | None
    master_port: int | None
    job_name: str
    datacenter: str
    username: str
    package_dir: Path
    entry: str
    output_dir: Path
    passes: int | None
    venv_cache: Path | None
    pserver_wait_timeout: float
    pod_ip: str | None

    @property
    def ps_mode(self) -> bool:
        return self.pservers > 0

    @property
    def log_dir(self) -> Path:
        return self.output_dir / f"{self.role}_{self.index}"


def _int(env: Mapping[str, str], name: str, minimum: int, default: int | None = None) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        if default is None:
            raise FactsError(f"{name} is required")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise FactsError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise FactsError(f"{name}={value} must be >= {minimum}")
    return value


def _port(name: str, raw: str) -> int:
    try:
        port = int(raw)
    except ValueError:
        raise FactsError(f"{name}: {raw!r} is not a port number") from None
    if not 0 < port < 65536:
        raise FactsError(f"{name}: {port} is not a port number (1-65535)")
    return port


def _hosts(env: Mapping[str, str], name: str, count: int) -> tuple[str, ...]:
    hosts = tuple(h.strip() for h in env.get(name, "").split(",") if h.strip())
    if len(hosts) != count:
        raise FactsError(f"{name} must list {count} host(s), got {len(hosts)}: {env.get(name, '')!r}")
    return hosts


def _ports(env: Mapping[str, str], name: str, count: int) -> tuple[int, ...]:
    items = [p.strip() for p in env.get(name, "").split(",") if p.strip()]
    ports = tuple(_port(name, p) for p in items)
    if len(ports) == 1:
        return ports * count  # one port for every host (the k8s case: each pod has its own IP)
    if len(ports) != count:
        raise FactsError(f"{name} must list 1 or {count} port(s), got {len(ports)}: {env.get(name, '')!r}")
    return ports


def _optional_port(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name, "").strip()
    return _port(name, raw) if raw else None


def _index(env: Mapping[str, str], hostname: str) -> int:
    for name in ("PADDLECLOUD_INDEX", "JOB_COMPLETION_INDEX"):  # the latter: k8s Indexed Job
        if env.get(name, "").strip():
            return _int(env, name, 0)
    m = re.search(r"-(\d+)$", hostname.split(".", 1)[0])  # StatefulSet pod: <name>-<ordinal>
    if m:
        return int(m.group(1))
    raise FactsError(
        f"PADDLECLOUD_INDEX is required (no JOB_COMPLETION_INDEX, hostname {hostname!r} has no -<n> suffix)"
    )


def read_facts(env: Mapping[str, str], hostname: str) -> Facts:
    """Parse and validate the engine-provided facts; raises FactsError naming the bad variable."""
    role = env.get("PADDLECLOUD_ROLE", "").strip()
    if role not in ("pserver", "trainer"):
        raise FactsError(f"PADDLECLOUD_ROLE must be 'pserver' or 'trainer', got {role!r}")
    trainers = _int(env, "PADDLECLOUD_TRAINERS", 1)
    pservers = _int(env, "PADDLECLOUD_PSERVERS", 0)
    index = _index(env, hostname)
    count = pservers if role == "pserver" else trainers
    if role == "pserver" and pservers == 0:
        raise FactsError("PADDLECLOUD_ROLE=pserver but PADDLECLOUD_PSERVERS=0 (collective mode)")
    if index >= count:
        raise FactsError(f"{role} index {index} is out of range: the job has {count} {role}(s)")
    gloo_port = _optional_port(env, "PADDLECLOUD_GLOO_PORT")
    if pservers and gloo_port is None:
        raise FactsError("PADDLECLOUD_GLOO_PORT is required in parameter-server mode (PADDLECLOUD_PSERVERS>0)")
    entry = env.get("PADDLECLOUD_ENTRY", "").strip()
    if not entry:
        raise FactsError("PADDLECLOUD_ENTRY is required (e.g. 'python train.py')")
    output = env.get("PADDLECLOUD_OUTPUT_DIR", "").strip()
    if not output:
        raise FactsError("PADDLECLOUD_OUTPUT_DIR is required")
    timeout_raw = env.get("PADDLECLOUD_PSERVER_WAIT_TIMEOUT", "").strip() or "300"
    try:
        timeout = float(timeout_raw)
    except ValueError:
        raise FactsError(f"PADDLECLOUD_PSERVER_WAIT_TIMEOUT={timeout_raw!r} is not a number") from None
    passes = _int(env, "PADDLECLOUD_PASSES", 1) if env.get("PADDLECLOUD_PASSES", "").strip() else None
    cache = env.get("PADDLECLOUD_VENV_CACHE", "").strip()
    return Facts(
        role=role,
        index=index,
        trainers=trainers,
        pservers=pservers,
        pserver_hosts=_hosts(env, "PADDLECLOUD_PSERVER_HOSTS", pservers) if pservers else (),
        pserver_ports=_ports(env, "PADDLECLOUD_PSERVER_PORTS", pservers) if pservers else (),
        # A pserver never needs the trainers' addresses (so it never waits for their DNS names).
        trainer_hosts=_hosts(env, "PADDLECLOUD_TRAINER_HOSTS", trainers) if role == "trainer" else (),
        trainer_ports=_ports(env, "PADDLECLOUD_TRAINER_PORTS", trainers) if role == "trainer" else (),
        gloo_port=gloo_port,
        master_port=_optional_port(env, "PADDLECLOUD_MASTER_PORT"),
        job_name=env.get("PADDLECLOUD_JOB_NAME", ""),
        datacenter=env.get("PADDLECLOUD_DATACENTER", ""),
        username=env.get("PADDLECLOUD_USERNAME", ""),
        package_dir=Path(env.get("PADDLECLOUD_PACKAGE_DIR", "").strip() or os.getcwd()),
        entry=entry,
        output_dir=Path(output),
        passes=passes,
        venv_cache=Path(cache) if cache else None,
        pserver_wait_timeout=timeout,
        pod_ip=env.get("PADDLECLOUD_POD_IP", "").strip() or None,
    )


def paddle_env(facts: Facts, resolve: Resolver) -> dict[str, str]:
    """The variables Paddle (and the original PaddleCloud) read, for this process; no side effects.

    ``resolve`` maps a host name to an IP address. This process's own entry uses POD_IP (the
    downward-API IP when given) so that ``POD_IP:PADDLE_PORT`` appears literally in the list.
    """
    is_pserver = facts.role == "pserver"
    own_hosts = facts.pserver_hosts if is_pserver else facts.trainer_hosts
    own_ports = facts.pserver_ports if is_pserver else facts.trainer_ports
    pod_ip = facts.pod_ip or resolve(own_hosts[facts.index])
    port = own_ports[facts.index]

    def res(role: str, i: int, host: str) -> str:
        return pod_ip if (role == facts.role and i == facts.index) else resolve(host)

    pserver_ips = [res("pserver", i, h) for i, h in enumerate(facts.pserver_hosts)]
    trainer_ips = [res("trainer", i, h) for i, h in enumerate(facts.trainer_hosts)]
    pserver_eps = [f"{ip}:{p}" for ip, p in zip(pserver_ips, facts.pserver_ports, strict=True)]
    trainer_eps = [f"{ip}:{p}" for ip, p in zip(trainer_ips, facts.trainer_ports, strict=True)]

    env: dict[str, str] = {
        "PADDLE_TRAINERS_NUM": str(facts.trainers),
        "POD_IP": pod_ip,
        "PADDLE_PORT": str(port),
        # The original PaddleCloud names (v1 trainers and user scripts read these).
        "TRAINERS": str(facts.trainers),
        "PADDLE_INIT_NUM_GRADIENT_SERVERS": str(facts.trainers),
        "PADDLE_INIT_PORT": str(port),
        "PADDLE_JOB_NAME": facts.job_name,
        "PADDLE_CLOUD_CURRENT_DATACENTER": facts.datacenter,
        "PADDLE_CLOUD_USERNAME": facts.username,
        "PYTHONUNBUFFERED": "1",
    }
    if not is_pserver:
        env |= {
            "PADDLE_TRAINER_ENDPOINTS": ",".join(trainer_eps),
            "PADDLE_TRAINER_ID": str(facts.index),
            "TRAINER_ID": str(facts.index),
            "PADDLE_INIT_TRAINER_ID": str(facts.index),
        }
    if facts.passes is not None:
        env["PADDLE_INIT_NUM_PASSES"] = str(facts.passes)
    if facts.ps_mode:
        assert facts.gloo_port is not None  # read_facts guarantees it in PS mode
        env |= {
            "TRAINING_ROLE": "PSERVER" if is_pserver else "TRAINER",
            "PADDLE_PSERVERS_IP_PORT_LIST": ",".join(pserver_eps),
            "PADDLE_INIT_PSERVERS": ",".join(pserver_ips),
            # Trainers: without gloo every fleet barrier silently does nothing (trap 5).
            # Pservers: 0, so pserver 0 does not host the store and block in fleet.init() until
            # every trainer rendezvoused; its launcher serves the store instead (gloo_store.py).
            "PADDLE_WITH_GLOO": "0" if is_pserver else "1",
            "PADDLE_GLOO_RENDEZVOUS": "3",  # HTTP store on pserver 0's host
            "PADDLE_GLOO_HTTP_ENDPOINT": f"{pserver_ips[0]}:{facts.gloo_port}",
            # PS cannot run the new PIR graphs (trap 1).
            "FLAGS_enable_pir_api": "0",
        }
    else:
        env |= {
            "PADDLE_CURRENT_ENDPOINT": trainer_eps[facts.index],
            "PADDLE_NNODES": str(facts.trainers),
            # Without it: "Call paddle.distributed.init_parallel_env first" on CPU.
            "PADDLE_DISTRI_BACKEND": "gloo",
        }
        if facts.master_port is not None:
            env["PADDLE_MASTER"] = f"{trainer_ips[0]}:{facts.master_port}"
    return env


def pserver_endpoints(env: Mapping[str, str]) -> list[tuple[str, int]]:
    """(ip, port) of every pserver, in index order, from a computed env."""
    out = []
    for ep in filter(None, env.get("PADDLE_PSERVERS_IP_PORT_LIST", "").split(",")):
        host, port = ep.rsplit(":", 1)
        out.append((host, int(port)))
    return out
