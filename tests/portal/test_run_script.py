"""`make run`'s scripts: never talk to another program on the port; production-like settings pass the checks."""

from __future__ import annotations

import contextlib
import http.server
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from django.test import Client, override_settings

from tests.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]


def run_script(snippet: str, port: int, var_dir: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run part of scripts/common.sh as run.sh does, on this port and var directory."""
    env = {**os.environ, "PADDLECLOUD_PORT": str(port), "PADDLECLOUD_VAR_DIR": str(var_dir), **extra}
    env.pop("PADDLECLOUD_PUBLIC_URL", None)
    return subprocess.run(["bash", "-c", f"set -euo pipefail; source scripts/common.sh; {snippet}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip


def other_program(instance: str | None) -> tuple[http.server.HTTPServer, int]:
    """A small HTTP server on 127.0.0.1 that answers every GET, sending this instance header if given."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            if instance is not None:
                self.send_header("X-PaddleCloud-Instance", instance)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


@pytest.fixture
def server_without_header() -> Iterator[int]:
    server, port = other_program(None)
    yield port
    server.shutdown()
    server.server_close()


def test_start_portal_refuses_a_port_another_program_holds(server_without_header: int, tmp_path: Path) -> None:
    result = run_script("start_portal", server_without_header, tmp_path)
    assert result.returncode == 1
    assert f"port {server_without_header} on 127.0.0.1 is taken by another program" in result.stderr
    assert "PADDLECLOUD_PORT=" in result.stderr
    assert not (tmp_path / "run" / "portal.pid").exists()  # gunicorn was never started


def test_start_portal_refuses_a_bad_port(tmp_path: Path) -> None:
    result = run_script("start_portal", 70000, tmp_path)
    assert result.returncode == 1 and "PADDLECLOUD_PORT" in result.stderr


def test_a_free_port_passes_the_check(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert run_script("require_free_port", port, tmp_path).returncode == 0


@pytest.mark.parametrize("header", [None, "someone-elses-instance"])
def test_wait_for_portal_never_accepts_another_program(header: str | None, tmp_path: Path) -> None:
    server, port = other_program(header)
    try:
        (tmp_path / "run").mkdir()
        (tmp_path / "run" / "portal.instance").write_text("ours\n")
        result = run_script("wait_for_portal", port, tmp_path)
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 1
    assert f"port {port} on 127.0.0.1 answers, but not as the portal this run started" in result.stderr
    assert "PADDLECLOUD_PORT=" in result.stderr


def test_wait_for_portal_accepts_the_portal_it_started(tmp_path: Path) -> None:
    server, port = other_program("ours")
    try:
        (tmp_path / "run").mkdir()
        (tmp_path / "run" / "portal.instance").write_text("ours\n")
        result = run_script("wait_for_portal", port, tmp_path)
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 0, result.stderr


def test_the_portal_sends_its_instance_header(db: None) -> None:
    with override_settings(PADDLECLOUD_INSTANCE="abc123"):
        response = Client().get("/api/v1/version")
    assert response["X-PaddleCloud-Instance"] == "abc123"


def test_make_run_is_production_like_by_default(tmp_path: Path) -> None:
    result = run_script('echo "DEBUG=$DEBUG EMBEDDED=$PADDLECLOUD_EMBEDDED"', 8000, tmp_path)
    assert result.stdout.strip() == "DEBUG=false EMBEDDED=true"
    env = {**os.environ, "DEBUG": "true"}
    developer = subprocess.run(
        ["bash", "-c", 'source scripts/common.sh; echo "DEBUG=$DEBUG"'],
        cwd=ROOT,
        env={**env, "PADDLECLOUD_VAR_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert developer.stdout.strip() == "DEBUG=true"


def check(env: dict[str, str], var_dir: Path) -> subprocess.CompletedProcess[str]:
    """manage.py check in a fresh process with only these settings from the environment."""
    prefixes = ("DEBUG", "PADDLECLOUD_", "DATABASE_URL", "CELERY_", "SECRET_KEY", "ALLOWED_HOSTS")
    full = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    full.update({"PADDLECLOUD_VAR_DIR": str(var_dir), "DJANGO_SETTINGS_MODULE": "portal.settings", **env})
    return subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=full, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def test_the_embedded_portal_passes_the_production_check_with_debug_off(tmp_path: Path) -> None:
    result = check({"DEBUG": "false", "PADDLECLOUD_EMBEDDED": "true"}, tmp_path)
    assert result.returncode == 0, result.stderr
    for name in ("secret_key", "encryption_key"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600


def test_the_embedded_portal_answers_on_loopback_only(tmp_path: Path) -> None:
    result = check({"DEBUG": "false", "PADDLECLOUD_EMBEDDED": "true", "ALLOWED_HOSTS": "localhost,portal.example"},
                   tmp_path)  # fmt: skip
    assert result.returncode != 0
    assert "paddlecloud.E002" in result.stderr and "portal.example" in result.stderr


def test_without_embedded_mode_debug_off_still_demands_production_settings(tmp_path: Path) -> None:
    result = check({"DEBUG": "false"}, tmp_path)
    assert result.returncode != 0
    for name in ("SECRET_KEY", "PADDLECLOUD_ENCRYPTION_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "ALLOWED_HOSTS"):
        assert f"{name} must be set when DEBUG is off" in result.stderr


def test_a_generated_secret_readable_by_others_stops_the_portal(tmp_path: Path) -> None:
    (tmp_path / "secret_key").write_text("x" * 50)
    (tmp_path / "secret_key").chmod(0o644)
    result = check({"DEBUG": "false", "PADDLECLOUD_EMBEDDED": "true"}, tmp_path)
    assert result.returncode != 0
    assert "paddlecloud.E003" in result.stderr and "chmod 600" in result.stderr


def consumed_queues(log: Path) -> list[str] | None:
    """The queues a Celery worker's start banner lists, once it says it is ready; None before."""
    text = log.read_text(errors="replace") if log.exists() else ""
    if " ready." not in text:
        return None
    return re.findall(r"^\s*\.> (\S+)\s", text, flags=re.MULTILINE)


@pytest.mark.celery
def test_make_run_starts_a_worker_per_lane_and_make_stop_stops_them(tmp_path: Path) -> None:
    database = {"DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}  # not the developer's
    try:
        started = run_script("start_worker", 8000, tmp_path, **database)
        assert started.returncode == 0, started.stderr
        logs = {name: tmp_path / "log" / f"{name}.log" for name in ("worker", "control", "side")}
        queues = {name: wait_for(partial(consumed_queues, log), f"the {name} worker to start", 60)
                  for name, log in logs.items()}  # fmt: skip
        assert queues == {"worker": ["celery"], "control": ["celery-control"], "side": ["celery-notify", "celery-side"]}
    finally:
        stopped = run_script("scripts/stop.sh", 8000, tmp_path, **database)
    assert stopped.returncode == 0, stopped.stderr
    assert all(f"{name} stopped" in stopped.stdout for name in ("worker", "control", "side"))
    assert not list((tmp_path / "run").glob("*.pid"))


REDIS_TEST_DB = 13  # a database of the CI Redis that no other test uses


def beat_sent_a_task(log: Path) -> bool | None:
    """True once beat sent its first periodic task; raises if beat died."""
    text = log.read_text(errors="replace") if log.exists() else ""
    if "beat raised exception" in text or "No such file or directory" in text:
        raise AssertionError(f"beat crashed:\n{text[-3000:]}")
    return "Scheduler: Sending due task" in text or None


@pytest.mark.celery
def test_make_run_with_a_redis_broker_starts_beat(tmp_path: Path) -> None:
    """Beat's schedule folder exists whatever the broker: with Redis, beat used to crash on start."""
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "CELERY_BROKER_URL": f"redis://127.0.0.1:6379/{REDIS_TEST_DB}",
    }
    try:
        started = run_script("start_worker", 8000, tmp_path, **env)
        assert started.returncode == 0, started.stderr
        wait_for(partial(beat_sent_a_task, tmp_path / "log" / "control.log"), "beat to send a task", 90)
        assert (tmp_path / "celery" / "beat-schedule").exists() or list((tmp_path / "celery").glob("beat-schedule*"))
    finally:
        stopped = run_script("scripts/stop.sh", 8000, tmp_path, **env)
    assert stopped.returncode == 0, stopped.stderr


LINGERING = "bash -c '(trap \"\" TERM; exec sleep 30) & wait'"  # a leader with a child that outlives it


def test_a_worker_restarts_right_after_a_crash(tmp_path: Path) -> None:
    """SIGKILL the leader: a child of its group lingers, yet the next start is not refused as 'already running'."""
    first = run_script(f"start_bg fake {LINGERING}", 8000, tmp_path)
    assert "fake started" in first.stdout, first.stderr
    pid = int((tmp_path / "run" / "fake.pid").read_text().split()[0])
    try:
        wait_for(lambda: len(group_members(pid)) >= 2, "the child to start", 10)
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: pid not in group_members(pid), "the leader to go", 10)
        assert group_members(pid), "the child lingers in the group, as a crashed worker's children do"
        again = run_script(f"start_bg fake {LINGERING}", 8000, tmp_path)
        assert "fake started" in again.stdout, again.stdout + again.stderr
        second = int((tmp_path / "run" / "fake.pid").read_text().split()[0])
        assert second != pid
    finally:
        stopped = run_script("stop_bg fake", 8000, tmp_path)
        for group in {pid, *[int(p) for p in stopped.stdout.split() if p.isdigit()]}:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
    assert "fake stopped" in stopped.stdout


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[2]) == pgid:
                    members.append(int(entry.name))
    return members


def test_a_pid_file_naming_a_reused_pid_is_not_running(tmp_path: Path) -> None:
    """Another program that got the recorded pid is not our worker: its start time differs."""
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        (tmp_path / "run").mkdir()
        pidfile = tmp_path / "run" / "worker.pid"
        check = 'is_running "$RUN_DIR/worker.pid" && echo running || echo stopped'
        pidfile.write_text(f"{other.pid}\n1\n")  # the pid, with a start time it does not have
        assert run_script(check, 8000, tmp_path).stdout.strip() == "stopped"
        started = run_script(f"started_at {other.pid}", 8000, tmp_path).stdout.strip()
        pidfile.write_text(f"{other.pid}\n{started}\n")
        assert run_script(check, 8000, tmp_path).stdout.strip() == "running"
        stopped = run_script("stop_bg worker", 8000, tmp_path)
        assert "worker stopped" in stopped.stdout
        assert other.wait(10) == -signal.SIGTERM
    finally:
        other.kill()
        other.wait()


def test_make_stop_says_running_jobs_keep_running(tmp_path: Path) -> None:
    stopped = run_script("scripts/stop.sh", 8000, tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    assert "Running jobs keep running; the next `make run` adopts them" in stopped.stdout
