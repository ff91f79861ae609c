"""Bad input: every case exits non-zero with one line on stderr that names the problem, never a traceback.

Exit code 2 when paddlectl refuses before sending anything (usage, values, config), 1 when the
operation failed (the portal refused it, the network is down, a wrong password).
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from jobs.models import Job
from tests.cli.conftest import Portal, config_text, one_line_error, write_config

pytestmark = pytest.mark.django_db(transaction=True)

SUBMIT = ("submit", "-jobname", "fit", "-entry", "python train.py")


@pytest.fixture
def package(tmp_path: Path) -> str:
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "train.py").write_text("print(1)\n")
    return str(folder)


# (arguments, exit code, text the one line must contain); "PKG" stands for a real package directory.
CASES = [
    (("submit", "-job", "x", "-entry", "y", "PKG"), 2, "no such option: -job; did you mean -jobname?"),
    (("get", "jobs", "--colour"), 2, "no such option: --colour"),
    (("get", "jbos"), 2, "No such command 'jbos'"),
    ((*SUBMIT, "-memory", "1Gb", "PKG"), 2, "-memory: '1Gb' is not a quantity; use 1Gi, 1G or 512Mi"),
    ((*SUBMIT, "-cpu", "two", "PKG"), 2, "-cpu: 'two' is not a quantity; use a number of cores"),
    ((*SUBMIT, "-psmemory", "0", "PKG"), 2, "-psmemory: '0' must be greater than zero"),
    ((*SUBMIT, "-notify", "sms", "PKG"), 2, "-notify: 'sms' is not email, webhook=URL or none"),
    ((*SUBMIT, "-notify", "webhook=ftp://x", "PKG"), 2, "-notify: "),
    (("submit", "-jobname", "My_Job", "-entry", "x", "PKG"), 2, "-jobname: '_' is not allowed in DNS names"),
    (("submit", "-jobname", "a" * 41, "-entry", "x", "PKG"), 2, "-jobname: must be at most 40 characters (got 41)"),
    (("submit", "-jobname", "9lives", "-entry", "x", "PKG"), 2, "-jobname: must start with a letter"),
    ((*SUBMIT, "-parallelism", "0", "PKG"), 2, "-parallelism: must be between 1 and 1000 (got 0)"),
    ((*SUBMIT, "-parallelism", "many", "PKG"), 2, "-parallelism: 'many' is not a whole number or MIN:MAX (e.g. 4"),
    ((*SUBMIT, "-parallelism", "x:4", "PKG"), 2, "-parallelism: 'x:4' is not a whole number or MIN:MAX"),
    ((*SUBMIT, "-parallelism", "3:2", "PKG"), 2, "-parallelism: must be at most parallelism (2): an elastic job runs"),
    ((*SUBMIT, "-parallelism", "1:2", "-pservers", "1", "PKG"), 2, "-parallelism: an elastic size is for collective"),
    ((*SUBMIT, "-env", "PADDLE_TRAINER_ID=3", "PKG"), 2, "-env: 'PADDLE_TRAINER_ID' is set by PaddleCloud"),
    ((*SUBMIT, "-env", "NOVALUE", "PKG"), 2, "-env: 'NOVALUE' must be NAME=VALUE"),
    ((*SUBMIT, "./no/such/dir"), 2, "PACKAGE: ./no/such/dir does not exist"),
    (("submit", "-jobname", "fit", "PKG"), 2, "Missing option '-entry'"),
    ((*SUBMIT, "-chunk-size", "1000", "PKG"), 2, "--chunk-size: '1000' must be a multiple of 64Ki"),
    (("get", "jobs", "-o", "xml"), 2, "'xml' is not one of 'table', 'wide', 'json', 'yaml'"),
    (("logs", "-n", "-3", "fit"), 2, "-3 is not in the range x>=0"),
    (("ls", "data/here"), 2, "'data/here' is not a PFS path; PFS paths start with /pfs/<datacenter>/home/<user>/"),
    (("cp", "./a", "./b"), 2, "one side must be a /pfs/ path"),
    (("mkdir", "/pfs/local/home/alice/../bob"), 2, "'..' segments are not allowed"),
    ((*SUBMIT, "-cpu", "1000", "PKG"), 1, "quota: cpu: the job needs 1000 cores but your quota in local is 16 cores"),
    ((*SUBMIT, "-registry", "nosuch", "PKG"), 1, "-registry: you have no registry secret named 'nosuch'"),
    ((*SUBMIT, "-datacenter", "mars", "PKG"), 1, "datacenter 'mars'; you may use: local"),
    (("logs", "nosuch"), 1, "job 'nosuch' not found"),
    (("get", "workers", "nosuch"), 1, "job 'nosuch' not found"),
    (("kill", "nosuch"), 1, "job 'nosuch' not found"),
    (("delete", "registry", "nosuch"), 1, "registry secret 'nosuch' not found"),
    (("ls", "/pfs/local/home/bob"), 1, "/pfs/local/home/bob is another user's home; you may use only "
                                       "/pfs/local/home/alice"),
    (("ls", "/pfs/local/home/alice/nothing"), 1, "/pfs/local/home/alice/nothing: no such file or directory"),
    (("cp", "/pfs/local/home/alice/nothing", "."), 1, "/pfs/local/home/alice/nothing: no such file or directory"),
    (("registry", "-name", "Bad_Name", "-username", "u", "-password", "p", "-server", "r.io"), 1,
     "name: must be lowercase"),
]


@pytest.mark.parametrize(("args", "code", "message"), CASES, ids=[" ".join(c[0])[:50] for c in CASES])
def test_bad_input_is_one_line_naming_the_problem(
    portal: Portal, package: str, args: tuple[str, ...], code: int, message: str
) -> None:
    result = portal.run(*[package if a == "PKG" else a for a in args])
    assert result.exit_code == code, (result.stdout, result.stderr)
    line = one_line_error(result)
    assert line.startswith("error: ") and message in line, line
    assert not Job.objects.exists()


def test_a_job_name_in_use_is_refused_by_the_portal(portal: Portal) -> None:
    (portal.pfs_home / "pkgs" / "p").mkdir(parents=True)
    assert portal.run(*SUBMIT, "/pfs/local/home/alice/pkgs/p").exit_code == 0
    again = portal.run(*SUBMIT, "/pfs/local/home/alice/pkgs/p")
    assert again.exit_code == 1
    assert "-jobname: you already have an active job named 'fit'" in one_line_error(again)


def test_rm_of_a_directory_without_r_says_to_use_it(portal: Portal) -> None:
    (portal.pfs_home / "data").mkdir(parents=True)
    result = portal.run("rm", "/pfs/local/home/alice/data")
    assert result.exit_code == 1
    assert one_line_error(result) == "error: /pfs/local/home/alice/data is a directory; use rm -r to remove it and " \
                                     "everything in it"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_real_processes_exit_with_the_right_code_and_no_traceback(portal: Portal, package: str) -> None:
    """The installed script: usage errors 2, refusals 1, an unreachable portal and a wrong password 1."""
    usage = portal.process("submit", "-jobname", "x", "-entry", "y", "-memory", "lots", package)
    assert usage.returncode == 2 and usage.stderr == "error: -memory: 'lots' is not a quantity; use 1Gi, 1G or " \
                                                     "512Mi\n"
    flag = portal.process("get", "jobs", "-all")
    assert flag.returncode == 2 and "no such option: -all" in flag.stderr
    refused = portal.process("logs", "nosuch")
    assert (refused.returncode, refused.stderr) == (1, "error: job 'nosuch' not found\n")

    down = f"http://127.0.0.1:{_closed_port()}"
    write_config(portal.config, config_text(down))
    unreachable = portal.process("get", "jobs", PADDLECTL_RETRIES="1")
    assert unreachable.returncode == 1
    assert unreachable.stderr == f"error: cannot reach the portal at {down}: connection refused\n"

    write_config(portal.config, config_text(portal.url, password="wrong password"))
    shutil.rmtree(portal.home / ".paddle" / "token_cache")  # else the token cached above still works
    wrong = portal.process("get", "jobs")
    assert wrong.returncode == 1
    assert wrong.stderr == (f"error: login as alice at {portal.url} failed: username or password is incorrect "
                            "(the password in the config file)\n")

    (portal.config.parent / "broken").write_text("datacenters:\n  - name: [\n")
    bad_config = portal.process("--config", str(portal.config.parent / "broken"), "get", "jobs")
    assert bad_config.returncode == 2 and "not valid YAML" in bad_config.stderr
    for result in (usage, flag, refused, unreachable, wrong, bad_config):
        assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1
