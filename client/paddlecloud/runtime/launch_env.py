"""Job facts (the JobEnv variables) checked together and turned into Paddle's variables, as pure functions."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from paddlecloud.contract import layout
from paddlecloud.contract.jobenv import JobEnv, JobEnvError, env_name

Resolver = Callable[[str], str]


FactsError = JobEnvError  # a job variable is missing, malformed or inconsistent; the message names it


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
    rendezvous_timeout: float = 300.0  # PS mode: seconds the trainers' gloo rendezvous may take (rendezvous.py)
    log_limit: int | None = None  # bytes of log.txt kept (paddlecloud.contract.logcap); None: unbounded
    log_by_engine: bool = False  # the engine writes log.txt from the launcher's stdout (PADDLECLOUD_LOG_WRITER)
    node_ip: str | None = None  # k8s: the node's address (status.hostIP), the isolation wait's target
    isolation_port: int | None = None  # k8s: wait until node_ip:isolation_port is out of reach (isolation.py)
    isolation_timeout: float = 60.0  # seconds that wait may take

    @property
    def ps_mode(self) -> bool:
        return self.pservers > 0

    @property
    def log_dir(self) -> Path:
        return self.output_dir / layout.worker_folder(self.role, self.index)


def _hosts(hosts: tuple[str, ...], field: str, count: int) -> tuple[str, ...]:
    if len(hosts) != count:
        raise FactsError(f"{env_name(field)} must list {count} host(s), got {len(hosts)}: {','.join(hosts)!r}")
    return hosts


def _ports(ports: tuple[int, ...], field: str, count: int) -> tuple[int, ...]:
    if len(ports) == 1:
        return ports * count  # one port for every host (the k8s case: each pod has its own IP)
    if len(ports) != count:
        listed = ",".join(map(str, ports))
        raise FactsError(f"{env_name(field)} must list 1 or {count} port(s), got {len(ports)}: {listed!r}")
    return ports


def _index(job: JobEnv, env: Mapping[str, str], hostname: str) -> int:
    if job.index is not None:
        return job.index
    raw = env.get("JOB_COMPLETION_INDEX", "").strip()  # k8s Indexed Job
    if raw:
        if not raw.isdigit():
            raise FactsError(f"JOB_COMPLETION_INDEX={raw!r} is not an integer >= 0")
        return int(raw)
    m = re.search(r"-(\d+)$", hostname.split(".", 1)[0])  # StatefulSet pod: <name>-<ordinal>
    if m:
        return int(m.group(1))
    raise FactsError(
        f"{env_name('index')} is required (no JOB_COMPLETION_INDEX, hostname {hostname!r} has no -<n> suffix)"
    )


def read_facts(env: Mapping[str, str], hostname: str) -> Facts:
    """Parse (JobEnv.from_env) and check the variables together; raises FactsError naming the bad one."""
    job = JobEnv.from_env(env)
    role, trainers, pservers = job.role, job.trainers, job.pservers
    index = _index(job, env, hostname)
    count = pservers if role == "pserver" else trainers
    if role == "pserver" and pservers == 0:
        raise FactsError(f"{env_name('role')}=pserver but {env_name('pservers')}=0 (collective mode)")
    if index >= count:
        raise FactsError(f"{role} index {index} is out of range: the job has {count} {role}(s)")
    if pservers and job.gloo_port is None:
        raise FactsError(
            f"{env_name('gloo_port')} is required in parameter-server mode ({env_name('pservers')}>0)"
        )
    if job.isolation_port is not None and not job.node_ip:
        raise FactsError(f"{env_name('node_ip')} is required with {env_name('isolation_port')} (its target)")
    is_trainer = role == "trainer"
    return Facts(
        role=role,
        index=index,
        trainers=trainers,
        pservers=pservers,
        pserver_hosts=_hosts(job.pserver_hosts, "pserver_hosts", pservers) if pservers else (),
        pserver_ports=_ports(job.pserver_ports, "pserver_ports", pservers) if pservers else (),
        # A pserver never needs the trainers' addresses (so it never waits for their DNS names).
        trainer_hosts=_hosts(job.trainer_hosts, "trainer_hosts", trainers) if is_trainer else (),
        trainer_ports=_ports(job.trainer_ports, "trainer_ports", trainers) if is_trainer else (),
        gloo_port=job.gloo_port,
        master_port=job.master_port,
        job_name=job.job_name,
        datacenter=job.datacenter,
        username=job.username,
        package_dir=Path(job.package_dir or Path.cwd()),
        entry=job.entry,
        output_dir=Path(job.output_dir),
        passes=job.passes,
        venv_cache=Path(job.venv_cache) if job.venv_cache else None,
        pserver_wait_timeout=300.0 if job.pserver_wait_timeout is None else job.pserver_wait_timeout,
        log_by_engine=job.log_writer == "engine",
        pod_ip=job.pod_ip,
        log_limit=job.log_limit,
        node_ip=job.node_ip,
        isolation_port=job.isolation_port,
        isolation_timeout=60.0 if job.isolation_timeout is None else job.isolation_timeout,
        rendezvous_timeout=300.0 if job.rendezvous_timeout is None else job.rendezvous_timeout,
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
