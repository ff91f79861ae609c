"""The job's PADDLECLOUD_* environment: what the engines set and the launcher reads, typed, in one place.

Each field is the variable ``PADDLECLOUD_<FIELD>`` (``env_name``). Engines build a ``JobEnv`` and
call ``to_env()``; the launcher calls ``JobEnv.from_env(os.environ)``, which checks each variable
on its own (type, range) and raises ``JobEnvError`` naming it; the checks across variables (counts,
role against pservers) are the launcher's (``launch_env.read_facts``).

``VARIABLES`` lists them (``paddlecloud-launch --help`` prints it).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

from paddlecloud.contract.states import ROLES

PREFIX = "PADDLECLOUD_"

VARIABLES = """\
=================================  =========================================================
``PADDLECLOUD_ROLE``               ``pserver`` or ``trainer``
``PADDLECLOUD_INDEX``              this process's index among its role. If unset:
                                   ``JOB_COMPLETION_INDEX`` (k8s Indexed Job), else the
                                   trailing ``-<n>`` of the host name (StatefulSet pod).
``PADDLECLOUD_TRAINERS``           number of trainers (>= 1)
``PADDLECLOUD_PSERVERS``           number of pservers (>= 0; 0 = collective mode)
``PADDLECLOUD_PSERVER_HOSTS``      comma list, one host (DNS name or IP) per pserver
``PADDLECLOUD_PSERVER_PORTS``      comma list, one port per pserver, or one port for all
``PADDLECLOUD_TRAINER_HOSTS``      same for trainers (required on trainers; pservers ignore it)
``PADDLECLOUD_TRAINER_PORTS``      collective endpoints / a PS trainer's own PADDLE_PORT
``PADDLECLOUD_GLOO_PORT``          PS mode, required: gloo HTTP store port on pserver 0's host
``PADDLECLOUD_MASTER_PORT``        collective, optional: PADDLE_MASTER port on trainer 0's host
``PADDLECLOUD_JOB_NAME``           optional: exported as PADDLE_JOB_NAME
``PADDLECLOUD_DATACENTER``         optional: exported as PADDLE_CLOUD_CURRENT_DATACENTER
``PADDLECLOUD_USERNAME``           optional: exported as PADDLE_CLOUD_USERNAME
``PADDLECLOUD_PACKAGE_DIR``        the entry's working directory (default: the current one)
``PADDLECLOUD_HOME``               the job owner's PFS home as the job sees it,
                                   ``/pfs/<datacenter>/home/<user>`` (set by both engines)
``PADDLECLOUD_ENTRY``              shell command, run as ``/bin/sh -c ENTRY``
``PADDLECLOUD_OUTPUT_DIR``         job output folder; the log is ``<output>/<role>_<index>/log.txt``
``PADDLECLOUD_PASSES``             optional (>= 1): exported as PADDLE_INIT_NUM_PASSES
``PADDLECLOUD_VENV_CACHE``         venv cache dir (default ``$XDG_CACHE_HOME/paddlecloud/venvs``,
                                   else ``~/.cache/paddlecloud/venvs``)
``PADDLECLOUD_PSERVER_WAIT_TIMEOUT``  seconds (default 300) to wait for DNS names, and for every
                                   pserver to accept TCP before a trainer's fleet.init_worker() runs
``PADDLECLOUD_RENDEZVOUS_TIMEOUT``  PS mode: seconds (default 300) the trainers' gloo rendezvous
                                   may take from the first trainer's arrival; past it every
                                   trainer's launcher fails with exit code 72 naming it
``PADDLECLOUD_POD_IP``             optional: this process's IP (k8s: downward API status.podIP)
``PADDLECLOUD_ISOLATION_PORT``     optional (k8s): before anything else, wait until a TCP connect to
                                   ``PADDLECLOUD_NODE_IP`` (required with it: status.hostIP) on
                                   this port (the kubelet's) fails: the pod's NetworkPolicies are
                                   in force; past ``PADDLECLOUD_ISOLATION_TIMEOUT`` seconds
                                   (default 60) the launcher fails with exit code 73
``PADDLECLOUD_LOG_LIMIT``          optional: bytes of log.txt kept on disk (less counts as 65536);
                                   past it the head and the end are kept with a line saying how
                                   much was dropped between them (the datacenter's job log limit)
``PADDLECLOUD_LOG_WRITER``         optional: ``launcher`` (the default: the launcher writes log.txt)
                                   or ``engine`` (the launcher writes the log to its stdout only;
                                   the engine, outside the job's sandbox, writes log.txt and keeps
                                   it under the limit: the local engine)
``PADDLECLOUD_ATTEMPT``            this run of the job: 1, then one more after each preemption or
                                   restart after a failure (spec ``max_restarts``)
``PADDLECLOUD_PREEMPTED``          ``1`` when the attempt before was preempted: resume from the
                                   latest checkpoint (``paddlecloud.checkpoint.latest()``)
``PADDLECLOUD_RESTART_REASON``     optional: why this attempt runs when the one before failed and
                                   was restarted (``Reason: message``); resume as after a preemption
``PADDLECLOUD_PARAMS``             optional: the job's params as a JSON object (name: string,
                                   number or bool); read them with ``paddlecloud.params()``
``PADDLECLOUD_EXPERIMENT``         optional: the uid of the experiment the job is a trial of
``PADDLECLOUD_TRIAL``              optional (>= 0): the job's trial index in that experiment
``PADDLECLOUD_RESUME_FROM``        optional: a checkpoint folder of another run (``-resume-from``);
                                   ``paddlecloud.checkpoint.latest()`` returns it until the job
                                   saved one of its own
=================================  =========================================================
"""


class JobEnvError(ValueError):
    """A job variable is missing or malformed; the message names the variable."""


@dataclass(frozen=True)
class JobEnv:
    """Every PADDLECLOUD_* variable; None means unset (``to_env`` leaves it out)."""

    role: str
    trainers: int
    pservers: int
    entry: str
    output_dir: str
    index: int | None = None
    pserver_hosts: tuple[str, ...] = ()
    pserver_ports: tuple[int, ...] = ()
    trainer_hosts: tuple[str, ...] = ()
    trainer_ports: tuple[int, ...] = ()
    gloo_port: int | None = None
    master_port: int | None = None
    job_name: str = ""
    datacenter: str = ""
    username: str = ""
    package_dir: str | None = None
    home: str | None = None
    passes: int | None = None
    venv_cache: str | None = None
    pserver_wait_timeout: float | None = None
    rendezvous_timeout: float | None = None
    pod_ip: str | None = None
    node_ip: str | None = None
    isolation_port: int | None = None
    isolation_timeout: float | None = None
    log_limit: int | None = None
    log_writer: str | None = None  # LOG_WRITERS; None: the launcher
    attempt: int | None = None
    preempted: int | None = None
    restart_reason: str | None = None
    params: str | None = None  # JSON: the spec's params
    experiment: str | None = None  # the uid of the experiment the job is a trial of
    trial: int | None = None  # its index there
    resume_from: str | None = None  # a checkpoint folder of another run to start from

    def to_env(self) -> dict[str, str]:
        """The variables as a process's environment, in field order."""
        env: dict[str, str] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            env[env_name(f.name)] = ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
        return env

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> JobEnv:
        """Parse and check each variable on its own; raises JobEnvError naming the bad one."""
        role = _str(env, "role")
        if role not in ROLES:
            raise JobEnvError(f"{env_name('role')} must be 'pserver' or 'trainer', got {role!r}")
        entry = _str(env, "entry")
        if not entry:
            raise JobEnvError(f"{env_name('entry')} is required (e.g. 'python train.py')")
        output = _str(env, "output_dir")
        if not output:
            raise JobEnvError(f"{env_name('output_dir')} is required")
        return cls(
            role=role,
            trainers=_required_int(env, "trainers", 1),
            pservers=_required_int(env, "pservers", 0),
            entry=entry,
            output_dir=output,
            index=_int(env, "index", 0),
            pserver_hosts=_hosts(env, "pserver_hosts"),
            pserver_ports=_ports(env, "pserver_ports"),
            trainer_hosts=_hosts(env, "trainer_hosts"),
            trainer_ports=_ports(env, "trainer_ports"),
            gloo_port=_optional_port(env, "gloo_port"),
            master_port=_optional_port(env, "master_port"),
            job_name=env.get(env_name("job_name"), ""),
            datacenter=env.get(env_name("datacenter"), ""),
            username=env.get(env_name("username"), ""),
            package_dir=_str(env, "package_dir") or None,
            home=_str(env, "home") or None,
            passes=_int(env, "passes", 1),
            venv_cache=_str(env, "venv_cache") or None,
            pserver_wait_timeout=_float(env, "pserver_wait_timeout"),
            rendezvous_timeout=_float(env, "rendezvous_timeout", above=0),
            pod_ip=_str(env, "pod_ip") or None,
            node_ip=_str(env, "node_ip") or None,
            isolation_port=_optional_port(env, "isolation_port"),
            isolation_timeout=_float(env, "isolation_timeout", above=0),
            log_limit=_int(env, "log_limit", 1),
            log_writer=_log_writer(env),
            attempt=_int(env, "attempt", 1),
            preempted=_int(env, "preempted", 0),
            restart_reason=_str(env, "restart_reason") or None,
            params=_str(env, "params") or None,
            experiment=_str(env, "experiment") or None,
            trial=_int(env, "trial", 0),
            resume_from=_str(env, "resume_from") or None,
        )


LOG_WRITERS = ("launcher", "engine")


def _log_writer(env: Mapping[str, str]) -> str | None:
    writer = _str(env, "log_writer")
    if writer and writer not in LOG_WRITERS:
        raise JobEnvError(f"{env_name('log_writer')} must be 'launcher' or 'engine', got {writer!r}")
    return writer or None


_FIELDS = frozenset(f.name for f in dataclasses.fields(JobEnv))


def env_name(field: str) -> str:
    """The variable that carries a JobEnv field (for k8s valueFrom entries and error messages)."""
    if field not in _FIELDS:
        raise KeyError(f"JobEnv has no field {field!r}")
    return PREFIX + field.upper()


def _str(env: Mapping[str, str], field: str) -> str:
    return env.get(env_name(field), "").strip()


def _int(env: Mapping[str, str], field: str, minimum: int) -> int | None:
    name, raw = env_name(field), _str(env, field)
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise JobEnvError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise JobEnvError(f"{name}={value} must be >= {minimum}")
    return value


def _required_int(env: Mapping[str, str], field: str, minimum: int) -> int:
    value = _int(env, field, minimum)
    if value is None:
        raise JobEnvError(f"{env_name(field)} is required")
    return value


def _float(env: Mapping[str, str], field: str, above: float | None = None) -> float | None:
    raw = _str(env, field)
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise JobEnvError(f"{env_name(field)}={raw!r} is not a number") from None
    if above is not None and not (math.isfinite(value) and value > above):
        raise JobEnvError(f"{env_name(field)}={raw} must be a finite number > {above:g}")
    return value


def _port(name: str, raw: str) -> int:
    try:
        port = int(raw)
    except ValueError:
        raise JobEnvError(f"{name}: {raw!r} is not a port number") from None
    if not 0 < port < 65536:
        raise JobEnvError(f"{name}: {port} is not a port number (1-65535)")
    return port


def _optional_port(env: Mapping[str, str], field: str) -> int | None:
    raw = _str(env, field)
    return _port(env_name(field), raw) if raw else None


def _items(env: Mapping[str, str], field: str) -> list[str]:
    return [item.strip() for item in env.get(env_name(field), "").split(",") if item.strip()]


def _hosts(env: Mapping[str, str], field: str) -> tuple[str, ...]:
    return tuple(_items(env, field))


def _ports(env: Mapping[str, str], field: str) -> tuple[int, ...]:
    return tuple(_port(env_name(field), p) for p in _items(env, field))
