"""The launcher's env contract: PADDLECLOUD_* facts in, Paddle's variables out (pure functions)."""

from __future__ import annotations

import pytest
from paddlecloud.runtime.launch_env import Facts, FactsError, paddle_env, read_facts
from paddlecloud.runtime.pserver_gate import pserver_endpoints

DNS = {
    "job-x7k2-pserver-0.job-x7k2": "10.0.0.10",
    "job-x7k2-pserver-1.job-x7k2": "10.0.0.11",
    "job-x7k2-trainer-0.job-x7k2": "10.0.1.20",
    "job-x7k2-trainer-1.job-x7k2": "10.0.1.21",
}


def resolve(host: str) -> str:
    return DNS.get(host, host)


def ps_env(**over: str) -> dict[str, str]:
    env = {
        "PADDLECLOUD_ROLE": "trainer",
        "PADDLECLOUD_INDEX": "1",
        "PADDLECLOUD_TRAINERS": "2",
        "PADDLECLOUD_PSERVERS": "2",
        "PADDLECLOUD_PSERVER_HOSTS": "job-x7k2-pserver-0.job-x7k2,job-x7k2-pserver-1.job-x7k2",
        "PADDLECLOUD_PSERVER_PORTS": "7164",
        "PADDLECLOUD_TRAINER_HOSTS": "job-x7k2-trainer-0.job-x7k2,job-x7k2-trainer-1.job-x7k2",
        "PADDLECLOUD_TRAINER_PORTS": "7170",
        "PADDLECLOUD_GLOO_PORT": "7180",
        "PADDLECLOUD_JOB_NAME": "fit",
        "PADDLECLOUD_DATACENTER": "dc1",
        "PADDLECLOUD_USERNAME": "alice",
        "PADDLECLOUD_PACKAGE_DIR": "/pfs/dc1/home/alice/jobs/fit",
        "PADDLECLOUD_ENTRY": "python train.py",
        "PADDLECLOUD_OUTPUT_DIR": "/pfs/dc1/home/alice/jobs/fit/output",
        "PADDLECLOUD_PASSES": "3",
    }
    env.update(over)
    return {k: v for k, v in env.items() if v != "<unset>"}


def collective_env(**over: str) -> dict[str, str]:
    base = ps_env(
        PADDLECLOUD_PSERVERS="0",
        PADDLECLOUD_PSERVER_HOSTS="<unset>",
        PADDLECLOUD_PSERVER_PORTS="<unset>",
        PADDLECLOUD_GLOO_PORT="<unset>",
        PADDLECLOUD_MASTER_PORT="7190",
    )
    base.update(over)
    return {k: v for k, v in base.items() if v != "<unset>"}


def env_for(env: dict[str, str], hostname: str = "somehost") -> dict[str, str]:
    return paddle_env(read_facts(env, hostname), resolve)


def test_read_facts_parses_everything() -> None:
    f = read_facts(ps_env(), "h")
    assert isinstance(f, Facts)
    assert (f.role, f.index, f.trainers, f.pservers) == ("trainer", 1, 2, 2)
    assert f.pserver_ports == (7164, 7164)  # one port applies to every host
    assert f.passes == 3 and f.gloo_port == 7180 and f.master_port is None
    assert str(f.log_dir) == "/pfs/dc1/home/alice/jobs/fit/output/trainer_1"
    assert f.pserver_wait_timeout == 300


def test_ps_trainer_env() -> None:
    env = env_for(ps_env())
    assert env == env | {
        "TRAINING_ROLE": "TRAINER",
        "PADDLE_PSERVERS_IP_PORT_LIST": "10.0.0.10:7164,10.0.0.11:7164",
        "PADDLE_TRAINERS_NUM": "2",
        "PADDLE_TRAINER_ID": "1",
        "POD_IP": "10.0.1.21",
        "PADDLE_PORT": "7170",
        "PADDLE_WITH_GLOO": "1",
        "PADDLE_GLOO_RENDEZVOUS": "3",
        "PADDLE_GLOO_HTTP_ENDPOINT": "10.0.0.10:7180",
        "FLAGS_enable_pir_api": "0",
        "PADDLE_TRAINER_ENDPOINTS": "10.0.1.20:7170,10.0.1.21:7170",
        # the original system's names
        "TRAINER_ID": "1",
        "TRAINERS": "2",
        "PADDLE_INIT_TRAINER_ID": "1",
        "PADDLE_INIT_NUM_GRADIENT_SERVERS": "2",
        "PADDLE_INIT_PSERVERS": "10.0.0.10,10.0.0.11",
        "PADDLE_INIT_PORT": "7170",
        "PADDLE_INIT_NUM_PASSES": "3",
        "PADDLE_JOB_NAME": "fit",
        "PADDLE_CLOUD_CURRENT_DATACENTER": "dc1",
        "PADDLE_CLOUD_USERNAME": "alice",
        "PYTHONUNBUFFERED": "1",
    }
    assert "PADDLE_CURRENT_ENDPOINT" not in env and "PADDLE_DISTRI_BACKEND" not in env


def test_ps_pserver_env_has_own_endpoint_literally_in_list() -> None:
    # Trap 2: POD_IP:PADDLE_PORT must appear literally in PADDLE_PSERVERS_IP_PORT_LIST, even when
    # the downward-API IP is not what DNS says and the ports differ per pserver (local engine).
    env = env_for(
        ps_env(
            PADDLECLOUD_ROLE="pserver",
            PADDLECLOUD_PSERVER_PORTS="40001,40002",
            PADDLECLOUD_POD_IP="10.9.9.9",
            PADDLECLOUD_TRAINER_HOSTS="<unset>",
            PADDLECLOUD_TRAINER_PORTS="<unset>",
        )
    )
    own = f"{env['POD_IP']}:{env['PADDLE_PORT']}"
    assert own == "10.9.9.9:40002"
    assert own in env["PADDLE_PSERVERS_IP_PORT_LIST"].split(",")
    assert env["PADDLE_PSERVERS_IP_PORT_LIST"] == "10.0.0.10:40001,10.9.9.9:40002"
    assert env["TRAINING_ROLE"] == "PSERVER"
    # pservers do not host the gloo store (the launcher does): see gloo_store's docstring
    assert env["PADDLE_WITH_GLOO"] == "0"
    assert env["PADDLE_GLOO_HTTP_ENDPOINT"] == "10.0.0.10:7180"
    assert env["PADDLE_INIT_PORT"] == "40002"
    for name in ("PADDLE_TRAINER_ID", "TRAINER_ID", "PADDLE_INIT_TRAINER_ID", "PADDLE_TRAINER_ENDPOINTS"):
        assert name not in env


def test_pserver_never_resolves_trainer_names() -> None:
    asked: list[str] = []

    def recording(host: str) -> str:
        asked.append(host)
        return resolve(host)

    facts = read_facts(ps_env(PADDLECLOUD_ROLE="pserver", PADDLECLOUD_INDEX="0"), "h")
    paddle_env(facts, recording)
    assert all("pserver" in h for h in asked)


def test_collective_env() -> None:
    env = env_for(collective_env(PADDLECLOUD_INDEX="1"))
    assert env == env | {
        "PADDLE_TRAINER_ID": "1",
        "PADDLE_TRAINERS_NUM": "2",
        "PADDLE_TRAINER_ENDPOINTS": "10.0.1.20:7170,10.0.1.21:7170",
        "PADDLE_CURRENT_ENDPOINT": "10.0.1.21:7170",
        "PADDLE_MASTER": "10.0.1.20:7190",
        "PADDLE_NNODES": "2",
        "PADDLE_DISTRI_BACKEND": "gloo",
        "TRAINER_ID": "1",
        "TRAINERS": "2",
        "PADDLE_INIT_TRAINER_ID": "1",
        "PADDLE_INIT_NUM_GRADIENT_SERVERS": "2",
    }
    for name in ("TRAINING_ROLE", "PADDLE_PSERVERS_IP_PORT_LIST", "PADDLE_WITH_GLOO", "FLAGS_enable_pir_api"):
        assert name not in env
    assert "PADDLE_INIT_PSERVERS" not in env


def test_collective_without_master_port_has_no_master() -> None:
    env = env_for(collective_env(PADDLECLOUD_MASTER_PORT="<unset>"))
    assert "PADDLE_MASTER" not in env


def test_local_ports_per_trainer() -> None:
    env = env_for(
        collective_env(
            PADDLECLOUD_TRAINER_HOSTS="127.0.0.1,127.0.0.1",
            PADDLECLOUD_TRAINER_PORTS="41000,41001",
            PADDLECLOUD_INDEX="0",
        )
    )
    assert env["PADDLE_TRAINER_ENDPOINTS"] == "127.0.0.1:41000,127.0.0.1:41001"
    assert env["PADDLE_CURRENT_ENDPOINT"] == "127.0.0.1:41000"


def test_index_falls_back_to_job_completion_index() -> None:
    f = read_facts(ps_env(PADDLECLOUD_INDEX="<unset>", JOB_COMPLETION_INDEX="1"), "job-x7k2-trainer-0-abcde")
    assert f.index == 1


def test_index_falls_back_to_statefulset_hostname() -> None:
    f = read_facts(ps_env(PADDLECLOUD_ROLE="pserver", PADDLECLOUD_INDEX="<unset>"), "job-x7k2-pserver-1")
    assert f.index == 1
    f = read_facts(ps_env(PADDLECLOUD_ROLE="pserver", PADDLECLOUD_INDEX="<unset>"), "job-x7k2-pserver-0.job-x7k2")
    assert f.index == 0


def test_explicit_index_wins() -> None:
    f = read_facts(ps_env(PADDLECLOUD_INDEX="0", JOB_COMPLETION_INDEX="1"), "job-x7k2-pserver-1")
    assert f.index == 0


def test_pserver_endpoints_helper() -> None:
    env = env_for(ps_env())
    assert pserver_endpoints(env) == [("10.0.0.10", 7164), ("10.0.0.11", 7164)]
    assert pserver_endpoints(env_for(collective_env())) == []


@pytest.mark.parametrize(
    ("over", "hostname", "names"),
    [
        ({"PADDLECLOUD_ROLE": "worker"}, "h", "PADDLECLOUD_ROLE"),
        ({"PADDLECLOUD_ROLE": "<unset>"}, "h", "PADDLECLOUD_ROLE"),
        ({"PADDLECLOUD_INDEX": "<unset>"}, "laptop", "PADDLECLOUD_INDEX"),
        ({"PADDLECLOUD_INDEX": "x"}, "h", "PADDLECLOUD_INDEX"),
        ({"PADDLECLOUD_INDEX": "-1"}, "h", "PADDLECLOUD_INDEX"),
        ({"PADDLECLOUD_INDEX": "2"}, "h", "out of range"),
        ({"PADDLECLOUD_TRAINERS": "0"}, "h", "PADDLECLOUD_TRAINERS"),
        ({"PADDLECLOUD_TRAINERS": "<unset>"}, "h", "PADDLECLOUD_TRAINERS"),
        ({"PADDLECLOUD_PSERVERS": "two"}, "h", "PADDLECLOUD_PSERVERS"),
        ({"PADDLECLOUD_PSERVER_HOSTS": "a"}, "h", "PADDLECLOUD_PSERVER_HOSTS"),
        ({"PADDLECLOUD_PSERVER_PORTS": "1,2,3"}, "h", "PADDLECLOUD_PSERVER_PORTS"),
        ({"PADDLECLOUD_PSERVER_PORTS": "70000"}, "h", "PADDLECLOUD_PSERVER_PORTS"),
        ({"PADDLECLOUD_TRAINER_PORTS": "x"}, "h", "PADDLECLOUD_TRAINER_PORTS"),
        ({"PADDLECLOUD_TRAINER_HOSTS": "<unset>"}, "h", "PADDLECLOUD_TRAINER_HOSTS"),
        ({"PADDLECLOUD_GLOO_PORT": "<unset>"}, "h", "PADDLECLOUD_GLOO_PORT"),
        ({"PADDLECLOUD_ENTRY": "<unset>"}, "h", "PADDLECLOUD_ENTRY"),
        ({"PADDLECLOUD_OUTPUT_DIR": "<unset>"}, "h", "PADDLECLOUD_OUTPUT_DIR"),
        ({"PADDLECLOUD_PASSES": "0"}, "h", "PADDLECLOUD_PASSES"),
        ({"PADDLECLOUD_PSERVER_WAIT_TIMEOUT": "soon"}, "h", "PADDLECLOUD_PSERVER_WAIT_TIMEOUT"),
        ({"PADDLECLOUD_MASTER_PORT": "0"}, "h", "PADDLECLOUD_MASTER_PORT"),
    ],
)
def test_bad_facts_name_the_variable(over: dict[str, str], hostname: str, names: str) -> None:
    with pytest.raises(FactsError, match=names):
        read_facts(ps_env(**over), hostname)


def test_pserver_role_in_collective_mode_is_an_error() -> None:
    with pytest.raises(FactsError, match="PADDLECLOUD_PSERVERS=0"):
        read_facts(collective_env(PADDLECLOUD_ROLE="pserver", PADDLECLOUD_INDEX="0"), "h")
