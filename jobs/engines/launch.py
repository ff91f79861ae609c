"""The launcher's environment as every engine fills it: one rule for what a job's launcher is told.

An engine says where the job's peers are (`Peers`: hosts and ports, which differ: loopback ports on the local
engine, DNS names and fixed ports in a cluster) and where the job sees its folders; everything else comes from
the job the same way on both engines, here: the counts (`Job.trainers`, `Job.pservers`), the entry, the passes,
the params, the experiment and trial it is (if any), the attempt (with `preempted` after a preemption,
`restart_reason` after a failure's restart) and the datacenter's rendezvous bound. The variables themselves are
paddlecloud.contract.jobenv's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from paddlecloud.contract.jobenv import JobEnv

from jobs.models import RESUME_CHECKPOINT, SPEC_EXPERIMENT, SPEC_TRIAL, Job


def params_json(spec: dict[str, Any]) -> str | None:
    """The spec's params as the job reads them (PADDLECLOUD_PARAMS, paddlecloud.params()); None where none."""
    return json.dumps(spec["params"], sort_keys=True, ensure_ascii=False) if spec.get("params") else None


@dataclass(frozen=True)
class SpecFacts:
    """What the job's spec tells its launcher beyond its shape, read from the spec in this one place for both engines:
    its params, the experiment and trial it is, and the checkpoint it starts from."""

    params: str | None = None  # the spec's params as JSON (PADDLECLOUD_PARAMS); None: it has none
    experiment: str | None = None  # the experiment's uid and the trial's index, where the job is a trial
    trial: int | None = None
    resume_from: str | None = None  # the checkpoint folder it starts from, as the job sees it (PFS paths are alike)

    @classmethod
    def of(cls, spec: dict[str, Any]) -> SpecFacts:
        resume = spec.get(RESUME_CHECKPOINT) or {}
        return cls(params_json(spec), spec.get(SPEC_EXPERIMENT), spec.get(SPEC_TRIAL), resume.get("path"))


@dataclass(frozen=True)
class Peers:
    """Where a worker finds the job's other workers: one host per worker, one port each or one for all."""

    pserver_hosts: tuple[str, ...]
    pserver_ports: tuple[int, ...]
    trainer_hosts: tuple[str, ...]
    trainer_ports: tuple[int, ...]
    gloo_port: int
    master_port: int
    pod_ip: str | None = None  # None: the engine sets PADDLECLOUD_POD_IP its own way (a pod's downward API)


@dataclass(frozen=True)
class Launch:
    """What every worker of one job is told about the job; `env` adds the worker's role, index and peers."""

    job_name: str
    datacenter: str
    username: str
    trainers: int
    pservers: int
    entry: str
    passes: int
    attempt: int
    package_dir: str  # the folders as the job sees them (a sandbox's or a pod's mount points)
    home: str
    output_dir: str
    log_limit: int | None
    isolation_port: int | None = None
    log_writer: str | None = None  # "engine" where the engine writes log.txt from the launcher's stdout (local)
    facts: SpecFacts = field(default_factory=SpecFacts)
    restart_reason: str | None = None  # the failure of the attempt before, where it was restarted after one

    @classmethod
    def of(
        cls,
        job: Job,
        datacenter: str,
        package_dir: str,
        home: str,
        output_dir: str,
        log_limit: int | None,
        log_writer: str | None = None,
    ) -> Launch:
        """The job row's facts, and where its folders are as it sees them."""
        return cls(
            job_name=job.name,
            datacenter=datacenter,
            username=job.owner.get_username(),
            trainers=job.trainers,
            pservers=job.pservers,
            entry=job.spec["entry"],
            passes=int(job.spec.get("passes") or 1),
            attempt=job.attempt,
            restart_reason=job.restarted_after(),
            facts=SpecFacts.of(job.spec),
            package_dir=package_dir,
            home=home,
            output_dir=output_dir,
            log_limit=log_limit,
            log_writer=log_writer,
        )

    def env(self, role: str, peers: Peers, index: int | None = None) -> dict[str, str]:
        return JobEnv(
            role=role,
            index=index,
            trainers=self.trainers,
            pservers=self.pservers,
            pserver_hosts=peers.pserver_hosts,
            pserver_ports=peers.pserver_ports,
            trainer_hosts=peers.trainer_hosts,
            trainer_ports=peers.trainer_ports,
            gloo_port=peers.gloo_port,
            master_port=peers.master_port,
            pod_ip=peers.pod_ip,
            job_name=self.job_name,
            datacenter=self.datacenter,
            username=self.username,
            package_dir=self.package_dir,
            home=self.home,
            entry=self.entry,
            output_dir=self.output_dir,
            passes=self.passes,
            log_limit=self.log_limit,
            log_writer=self.log_writer,
            rendezvous_timeout=settings.PADDLECLOUD_RENDEZVOUS_TIMEOUT,
            attempt=self.attempt,
            preempted=1 if self.attempt > 1 and self.restart_reason is None else None,  # else a failure's restart
            restart_reason=self.restart_reason,
            isolation_port=self.isolation_port,
            params=self.facts.params,
            experiment=self.facts.experiment,
            trial=self.facts.trial,
            resume_from=self.facts.resume_from,
        ).to_env()
