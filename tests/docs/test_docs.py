"""The documentation site (docs/, mkdocs.yml) against the code: nothing here needs a database or a server.

- every paddlectl command (walking the click group) and every option of it is in docs/reference/cli.md;
- every environment variable portal/settings.py and `make run` read is in docs/reference/settings.md;
- every variable of the job's environment (JobEnv, and what the launcher exports for Paddle) is in
  docs/reference/job-environment.md;
- the generated pages are what tools/docs makes from the code now (a changed option without `make docs-gen` fails);
- every repository path the pages name exists;
- `mkdocs build --strict` succeeds (broken links and anchors, pages missing from the nav fail it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import click
import pytest
from paddlecloud.contract.jobenv import JobEnv, env_name
from paddlecloud.ctl.commands import cli
from paddlecloud.runtime.launch_env import Facts, paddle_env

from tools.docs import gen_api, gen_cli, gen_settings
from tools.docs.common import stale

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"
# Top-level folders of the repository: a `backticked` token starting with one of them is a path the docs name.
REPO_FOLDERS = (
    "accounts", "bench", "client", "core", "datacenters", "deploy", "examples", "health", "images", "jobs",
    "notifications", "portal", "registry", "scripts", "static", "storage", "templates", "tests", "tools", ".ci",
)


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name, command in group.commands.items():
        if command.hidden:
            continue
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


def test_every_paddlectl_command_and_option_is_in_the_cli_reference() -> None:
    page = (REFERENCE / "cli.md").read_text(encoding="utf-8")
    commands = list(_commands(cli))
    assert len(commands) > 20  # the walk found the tree, not an empty group
    missing = []
    for path, command in commands:
        name = " ".join(("paddlectl", *path))
        at = page.find(f"`{name}` {{ #")
        if at < 0:
            missing.append(name)
            continue
        following = re.search(r"\n#{2,4} `paddlectl", page[at + 1:])
        section = page[at:at + 1 + following.start()] if following else page[at:]
        missing += [f"{name} {opt}" for param in command.params if isinstance(param, click.Option)
                    and not param.hidden for opt in param.opts if opt not in section]
    assert not missing, f"not in docs/reference/cli.md (run `make docs-gen`): {missing}"


def _settings_variables() -> set[str]:
    source = (ROOT / "portal" / "settings.py").read_text(encoding="utf-8")
    names = set(re.findall(r"""\benv_(?:str|bool|int|list|secret)\(\s*["']([A-Z][A-Z0-9_]*)["']""", source))
    secrets = set(re.findall(r"""\benv_secret\(\s*["']([A-Z][A-Z0-9_]*)["']""", source))
    script = (ROOT / "scripts" / "common.sh").read_text(encoding="utf-8")
    return names | {f"{name}_FILE" for name in secrets} | set(re.findall(r"\$\{([A-Z][A-Z0-9_]*):-", script))


def test_every_environment_variable_the_settings_read_is_in_the_settings_reference() -> None:
    page = (REFERENCE / "settings.md").read_text(encoding="utf-8")
    variables = _settings_variables()
    assert {"DEBUG", "DATABASE_URL", "DATABASE_URL_FILE", "PADDLECLOUD_PORT"} <= variables  # the scan works
    missing = sorted(name for name in variables if f"`{name}`" not in page)
    assert not missing, f"not in docs/reference/settings.md (run `make docs-gen`): {missing}"


def _facts(pservers: int) -> Facts:
    trainers = 2
    return Facts(
        role="trainer", index=0, trainers=trainers, pservers=pservers,
        pserver_hosts=tuple(f"ps-{i}" for i in range(pservers)), pserver_ports=(7164,) * pservers,
        trainer_hosts=tuple(f"trainer-{i}" for i in range(trainers)), trainer_ports=(7165,) * trainers,
        gloo_port=7166 if pservers else None, master_port=None if pservers else 7167,
        job_name="fit", datacenter="local", username="alice", package_dir=Path("/pkg"), entry="python train.py",
        output_dir=Path("/out"), passes=2, venv_cache=None, pserver_wait_timeout=300.0, pod_ip="10.0.0.2",
    )  # fmt: skip


def test_the_job_environment_page_names_every_variable_a_job_sees() -> None:
    page = (REFERENCE / "job-environment.md").read_text(encoding="utf-8")
    ours = {env_name(field) for field in JobEnv.__dataclass_fields__}
    paddle = {name for pservers in (0, 2) for name in paddle_env(_facts(pservers), lambda host: "10.0.0.9")}
    missing = sorted(name for name in ours | paddle | {"SYS_JOB_ID"} if f"`{name}`" not in page)
    assert not missing, f"not in docs/reference/job-environment.md: {missing}"


@pytest.mark.parametrize(
    "render", [gen_cli.render, gen_settings.render, gen_api.render], ids=["cli", "settings", "api"]
)
def test_the_generated_pages_are_current(render: Callable[[], dict[Path, str]]) -> None:
    problems = [line for path, text in render().items() for line in stale(path, text)]
    assert not problems, "stale generated docs: run `make docs-gen`\n" + "\n".join(problems)


def test_every_repository_path_the_pages_name_exists() -> None:
    missing = []
    for page in sorted(DOCS.rglob("*.md")):
        for token in re.findall(r"`([^`\s]+)`", page.read_text(encoding="utf-8")):
            path = re.sub(r":\d+$", "", token.split("::")[0].rstrip(".,;:)"))
            if any(c in path for c in "<>*{}$|") or path.split("/")[0] not in REPO_FOLDERS or "/" not in path:
                continue
            if not (ROOT / path).exists():
                missing.append(f"{page.relative_to(ROOT)}: {token}")
    assert not missing, "the docs name paths that do not exist (moved? update the page):\n" + "\n".join(missing)


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").is_file()
