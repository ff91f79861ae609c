"""Fixtures for the client package tests: plain pytest, no Django models, no database."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

LAUNCHER = [sys.executable, "-m", "paddlecloud.runtime.launcher"]


def base_facts(tmp_path: Path, **overrides: str) -> dict[str, str]:
    """A valid 1-trainer collective job's facts, with overrides."""
    pkg = tmp_path / "pkg"
    pkg.mkdir(exist_ok=True)
    facts = {
        "PADDLECLOUD_ROLE": "trainer",
        "PADDLECLOUD_INDEX": "0",
        "PADDLECLOUD_TRAINERS": "1",
        "PADDLECLOUD_PSERVERS": "0",
        "PADDLECLOUD_TRAINER_HOSTS": "127.0.0.1",
        "PADDLECLOUD_TRAINER_PORTS": "40001",
        "PADDLECLOUD_PACKAGE_DIR": str(pkg),
        "PADDLECLOUD_OUTPUT_DIR": str(tmp_path / "output"),
        "PADDLECLOUD_ENTRY": "echo hi",
        "PADDLECLOUD_VENV_CACHE": str(tmp_path / "venvs"),
        "PADDLECLOUD_POD_IP": "127.0.0.1",
    }
    facts.update(overrides)
    return facts


def launch_env(facts: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PADDLECLOUD_", "PADDLE_", "JOB_COMPLETION"))}
    return {**env, **facts}


def run_launcher(facts: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        LAUNCHER, env=launch_env(facts), capture_output=True, text=True, timeout=timeout, start_new_session=True
    )


@pytest.fixture
def facts(tmp_path: Path) -> dict[str, str]:
    return base_facts(tmp_path)


@contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[None]:
    """A stand-in portal's HTTP server answering on a thread for the block's length."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
