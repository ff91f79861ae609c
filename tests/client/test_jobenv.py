"""JobEnv: the engines' to_env() and the launcher's from_env() agree on every PADDLECLOUD_* variable."""

from __future__ import annotations

import dataclasses

import pytest
from paddlecloud.contract.jobenv import JobEnv, JobEnvError, env_name

FULL = JobEnv(
    role="trainer",
    trainers=2,
    pservers=2,
    entry="python train.py --lr 0.1",
    output_dir="/pfs/dc1/home/alice/jobs/fit/output",
    index=1,
    pserver_hosts=("fit-ps-0.fit", "fit-ps-1.fit"),
    pserver_ports=(7164,),
    trainer_hosts=("127.0.0.1", "127.0.0.1"),
    trainer_ports=(40001, 40002),
    gloo_port=7166,
    master_port=7167,
    job_name="fit",
    datacenter="dc1",
    username="alice",
    package_dir="/pfs/dc1/home/alice/jobs/fit",
    home="/pfs/dc1/home/alice",
    passes=3,
    venv_cache="/var/cache/venvs",
    pserver_wait_timeout=12.5,
    rendezvous_timeout=45.0,
    pod_ip="10.0.0.7",
    node_ip="192.168.1.20",
    isolation_port=10250,
    isolation_timeout=60.0,
    log_limit=256 * 1024 * 1024,
    log_writer="engine",
    attempt=2,
    preempted=1,
    restart_reason="TrainerFailed: trainer 0 exited with code 4",
    params='{"lr": 0.1}',
    experiment="lr-sweep-a1b2c",
    trial=3,
    resume_from="/pfs/local/home/alice/jobs/fit/output/fit-ab12c/checkpoints/step-7",
)
MINIMAL = JobEnv(role="pserver", trainers=1, pservers=1, entry="sh run.sh", output_dir="/out")


@pytest.mark.parametrize("job", [FULL, MINIMAL], ids=["every-field", "required-only"])
def test_from_env_reads_back_what_to_env_wrote(job: JobEnv) -> None:
    assert JobEnv.from_env(job.to_env()) == job


def test_every_field_is_one_paddlecloud_variable() -> None:
    env = FULL.to_env()
    assert sorted(env) == sorted(env_name(f.name) for f in dataclasses.fields(JobEnv))
    assert env["PADDLECLOUD_TRAINER_PORTS"] == "40001,40002"
    assert env["PADDLECLOUD_PSERVER_PORTS"] == "7164"
    assert env["PADDLECLOUD_PSERVER_WAIT_TIMEOUT"] == "12.5"


def test_unset_optionals_are_left_out_and_empty_lists_are_empty() -> None:
    env = MINIMAL.to_env()
    assert "PADDLECLOUD_INDEX" not in env and "PADDLECLOUD_POD_IP" not in env and "PADDLECLOUD_PASSES" not in env
    assert env["PADDLECLOUD_TRAINER_HOSTS"] == "" and env["PADDLECLOUD_JOB_NAME"] == ""


def test_env_name_refuses_a_field_that_does_not_exist() -> None:
    assert env_name("pod_ip") == "PADDLECLOUD_POD_IP"
    with pytest.raises(KeyError, match="nodes"):
        env_name("nodes")


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("PADDLECLOUD_ROLE", "worker", "must be 'pserver' or 'trainer'"),
        ("PADDLECLOUD_TRAINERS", "", "PADDLECLOUD_TRAINERS is required"),
        ("PADDLECLOUD_TRAINERS", "0", "must be >= 1"),
        ("PADDLECLOUD_INDEX", "one", "is not an integer"),
        ("PADDLECLOUD_TRAINER_PORTS", "40001,65536", "is not a port number"),
        ("PADDLECLOUD_GLOO_PORT", "x", "is not a port number"),
        ("PADDLECLOUD_PSERVER_WAIT_TIMEOUT", "soon", "is not a number"),
        ("PADDLECLOUD_ENTRY", " ", "PADDLECLOUD_ENTRY is required"),
        ("PADDLECLOUD_LOG_WRITER", "job", "must be 'launcher' or 'engine'"),
    ],
)
def test_a_bad_variable_is_named_in_the_error(name: str, value: str, message: str) -> None:
    env = FULL.to_env() | {name: value}
    with pytest.raises(JobEnvError, match=message) as caught:
        JobEnv.from_env(env)
    assert name in str(caught.value)
