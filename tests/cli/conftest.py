"""Fixtures for paddlectl tests: the portal live on a real port, alice's config in a private HOME.

Most tests run paddlectl in-process with click's CliRunner (fast); a few run the installed
`paddlectl` script as a real process (exit codes, no traceback, an upload cut half way).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from django.contrib.auth.models import User
from paddlecloud.ctl import output
from paddlecloud.ctl.commands import cli

from datacenters.models import Datacenter
from tests.conftest import PASSWORD
from tests.workers import WorkerProcess, start_worker

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PADDLECTL = Path(sys.executable).parent / "paddlectl"
REAL_HOME = os.environ.get("HOME", "")
GOLDEN = Path(__file__).parent / "golden"
NOW = datetime(2026, 1, 2, 12, 0, 0, tzinfo=UTC)


def config_text(url: str, username: str = "alice", password: str | None = PASSWORD, name: str = "local") -> str:
    secret = f"  password: {password!r}\n" if password is not None else ""
    return (
        "# written by the test\n"
        "datacenters:\n"
        f"- name: {name}\n"
        f"  username: {username}\n"
        f"{secret}"
        f"  endpoint: {url}\n"
        f"current-datacenter: {name}\n"
    )


def write_config(path: Path, text: str, mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


@dataclass
class Portal:
    url: str
    home: Path  # the test's $HOME
    config: Path
    datacenter: Datacenter
    user: User
    storage: Path  # the datacenter's storage root on disk
    remote_home: str = "/pfs/local/home/alice"

    @property
    def pfs_home(self) -> Path:
        return self.storage / "home" / "alice"

    def run(self, *args: str, input: str | None = None) -> Result:
        """paddlectl in this process (CliRunner); stdout and stderr apart."""
        return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PADDLE_", "PADDLECTL_"))}
        env.update({"HOME": str(self.home), "PADDLE_CONFIG": str(self.config), "PADDLECTL_RETRY_WAIT": "0.05"})
        env.update(extra)
        return env

    def process(
        self, *args: str, input: str | None = None, timeout: float = 120, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """The installed paddlectl script as a real process."""
        return subprocess.run(
            [str(PADDLECTL), *args], input=input, capture_output=True, text=True, timeout=timeout, env=self.env(**env)
        )


@pytest.fixture
def cli_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME and config path for paddlectl (never the developer's ~/.paddle)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PADDLE_CONFIG", str(home / ".paddle" / "config"))
    monkeypatch.setenv("PADDLECTL_RETRY_WAIT", "0.05")
    for name in ("PADDLE_NOTEBOOK", "PADDLE_TOKEN_CACHE", "PADDLECTL_RETRIES", "PADDLECTL_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def portal(live_server: Any, transactional_db: None, alice: User, local_dc: Datacenter, cli_home: Path) -> Portal:
    config = write_config(cli_home / ".paddle" / "config", config_text(live_server.url))
    return Portal(
        url=live_server.url, home=cli_home, config=config, datacenter=local_dc, user=alice,
        storage=Path(local_dc.storage_root),
    )


@pytest.fixture
def worker(transactional_db: None, tmp_path: Path) -> Iterator[WorkerProcess]:
    """A real Celery worker with beat; HOME is the real one so the launcher's venv cache is shared."""
    process = start_worker(tmp_path, beat=True, concurrency=2, extra_env={"HOME": REAL_HOME})
    yield process
    process.stop()


def one_line_error(result: Any) -> str:
    """The single stderr line of a failed command (asserting it is one line and no traceback)."""
    err: str = result.stderr
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("warning:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def pinned(monkeypatch: pytest.MonkeyPatch) -> datetime:
    """The client's clock, fixed, so ages in tables are the same on every run."""
    monkeypatch.setattr(output, "now", lambda: NOW)
    return NOW


def golden(name: str, text: str) -> None:
    """Compare with tests/cli/golden/<name>; UPDATE_GOLDEN=1 rewrites it (then read the diff)."""
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"output differs from {path}:\n{text}"
