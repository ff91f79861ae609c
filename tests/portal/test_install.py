"""`make install` (scripts/install.sh): the venv is made and filled by uv, and by pip, saying so, where uv can't be had.

Each test installs a small lock (uv, setuptools and six, their hashed blocks copied from the real lock) and a
client without dependencies into a venv of its own, from the package index as `make install` does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def lock_block(name: str) -> str:
    """The lock's lines of one package: its `name==version \\` line, its hashes and its `# via` comments."""
    lines = (ROOT / "requirements-lock.txt").read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.lower().startswith(f"{name}=="))
    end = start + 1
    while end < len(lines) and lines[end].startswith(" "):
        end += 1
    return "".join(lines[start:end])


def checkout(tmp_path: Path, lock: str) -> Path:
    """A folder laid out as the repository is for scripts/install.sh: the script, a lock, a small client."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "install.sh", tmp_path / "scripts" / "install.sh")
    (tmp_path / "requirements-lock.txt").write_text(lock)
    client = tmp_path / "client"
    (client / "tinyclient").mkdir(parents=True)
    (client / "tinyclient" / "__init__.py").write_text("NAME = 'tiny'\n")
    (client / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tinyclient"\nversion = "0.1"\n'
    )
    return tmp_path


def install(repo: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PADDLECLOUD_NO_UV", "VENV", "LOCK")}
    return subprocess.run(
        ["bash", "scripts/install.sh"], cwd=repo, env={**env, "PYTHON": "python3"},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def installed(repo: Path) -> str:
    python = repo / ".venv" / "bin" / "python"
    return subprocess.run(
        [str(python), "-c", "import six, tinyclient; print(six.__version__, tinyclient.NAME)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip


def test_the_venv_is_made_and_filled_by_uv_which_then_lives_in_it(tmp_path: Path) -> None:
    repo = checkout(tmp_path, lock_block("uv") + lock_block("setuptools") + lock_block("six"))
    result = install(repo)
    assert result.returncode == 0, result.stderr
    assert "pip installs the lock instead" not in result.stderr
    # uv writes its own version into the pyvenv.cfg of a venv it made; python -m venv does not.
    assert re.search(r"^uv = \d", (repo / ".venv" / "pyvenv.cfg").read_text(), re.M)
    assert os.access(repo / ".venv" / "bin" / "uv", os.X_OK)
    assert installed(repo).endswith(" tiny")


def test_without_uv_pip_installs_the_lock_and_says_why(tmp_path: Path) -> None:
    # A uv line whose hash matches no file: pip refuses it, as it would a platform without a uv wheel.
    bad_uv = re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + "0" * 64, lock_block("uv"))
    repo = checkout(tmp_path, bad_uv + lock_block("setuptools") + lock_block("six"))
    result = install(repo)
    assert result.returncode == 0, result.stderr
    assert "uv could not be installed here (see above), so pip installs the lock instead" in result.stderr
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in result.stderr  # the "see above": pip's own reason
    assert "uv = " not in (repo / ".venv" / "pyvenv.cfg").read_text()
    assert not (repo / ".venv" / "bin" / "uv").exists()
    assert installed(repo).endswith(" tiny")


def test_pythons_that_make_runs_keep_their_bytecode_where_the_machine_says_not_to() -> None:
    """The Makefile unexports PYTHONDONTWRITEBYTECODE: `make run`'s processes and the suite's workers compile a module
    once, not at every start (loading the portal's apps took twice the CPU from source)."""
    probe = "probe-bytecode: ; @python3 -c 'import sys; print(\"dont_write_bytecode\", sys.dont_write_bytecode)'"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run(["make", "-s", f"--eval={probe}", "probe-bytecode"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "dont_write_bytecode False"
    outside = subprocess.run(["python3", "-c", "import sys; print(sys.dont_write_bytecode)"], env=env,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert outside.stdout.strip() == "True"  # the machine's setting, which make alone sets aside
