"""paddlectl build and tools/build_docker.sh: the commands printed without a builder, and a real buildah build."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from paddlecloud.ctl.commands import cli

from tests.buildah import (
    buildah,
    buildah_storage,
    load_base,
    needs_buildah,
    paddlectl_build,
    require_buildah,
    trainer_package,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BASE = "registry.example.com/paddlecloud/paddle:3.0.0"
IMAGE = "localhost:5000/alice/fit:1"


def test_without_a_builder_it_prints_the_commands_and_keeps_the_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    context = tmp_path / "ctx"
    args = ["build", str(EXAMPLES / "fit_a_line"), "/workspace", BASE, IMAGE, "--push", "--context", str(context),
            "--base-user", "1000"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"no working image builder here (buildah, podman, or docker with a daemon); context: {context}",
        "build it with (podman and buildah take the same arguments):",
        f"  docker build -f {context}/Dockerfile -t {IMAGE} {context}",
        f"  docker push {IMAGE}",
    ]
    assert sorted(p.name for p in (context / "package").iterdir()) == [
        "README.md", "prepare_data.py", "requirements.txt", "train.py"
    ]
    assert f"FROM {BASE}\n" in (context / "Dockerfile").read_text()


def test_without_a_builder_a_package_with_requirements_needs_the_base_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    result = CliRunner().invoke(cli, ["build", str(EXAMPLES / "fit_a_line"), "/workspace", BASE, IMAGE])
    assert result.exit_code == 2
    assert "--base-user is required without a builder" in result.output
    assert not list(tmp_path.iterdir())


def test_build_docker_sh_takes_the_original_four_arguments_and_prints_the_commands(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "train.py").write_text("print('hi')\n")
    env = {"PATH": str(tmp_path / "empty"), "HOME": str(tmp_path)}  # no builder, not even docker's CLI
    script = [str(Path("/bin/bash")), str(ROOT / "tools" / "build_docker.sh")]
    done = subprocess.run([*script, str(package), "/opt/pkg", BASE, IMAGE], env=env, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    context = Path(done.stdout.splitlines()[0].rsplit("context: ", 1)[1])
    try:
        assert f"  docker build -f {context}/Dockerfile -t {IMAGE} {context}" in done.stdout.splitlines()
        assert (context / "package" / "train.py").read_text() == "print('hi')\n"
        assert "RUN" not in (context / "Dockerfile").read_text()
    finally:
        subprocess.run(["rm", "-rf", str(context)], check=True)
    usage = subprocess.run([*script, "--help"], env=env, capture_output=True, text=True, check=False)
    assert (usage.returncode, usage.stdout.split(":", 1)[0]) == (0, "usage")
    short = subprocess.run([*script, str(package), "/opt/pkg"], env=env, capture_output=True, text=True, check=False)
    assert short.returncode == 2 and short.stderr.startswith("usage: tools/build_docker.sh <src_trainer_package>")


def test_bad_arguments_are_one_line_errors_before_any_work(tmp_path: Path) -> None:
    for args, message in [
        ([str(tmp_path), "rel/path", BASE, IMAGE], "error: DEST: 'rel/path' must be an absolute path"),
        ([str(tmp_path), "/w", "Bad Image", IMAGE], "error: BASE_IMAGE: must not contain spaces or control characters"),
        ([str(tmp_path / "nope"), "/w", BASE, IMAGE], "error: SRC: "),
    ]:
        done = subprocess.run([str(Path(sys.executable).parent / "paddlectl"), "build", *args],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 2 and done.stderr.startswith(message) and done.stderr.count("\n") == 1, done.stderr


@pytest.fixture(scope="module")
def buildah_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], str]]:
    """buildah with a private storage root holding the node's runtime image; the env and the image's ref."""
    require_buildah()
    root = tmp_path_factory.mktemp("buildah")
    with buildah_storage(root) as env:
        yield env, load_base(env, root)


@needs_buildah
def test_buildah_builds_a_package_with_its_requirement_on_the_runtime_image_and_it_runs(
    buildah_env: tuple[dict[str, str], str], tmp_path: Path
) -> None:
    env, base = buildah_env
    package = trainer_package(tmp_path / "tiny")
    done = paddlectl_build(env, str(package), "/opt/job", base, "paddlecloud.local/t/tiny:1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "built paddlecloud.local/t/tiny:1 with buildah" in done.stderr
    fields = "{{.OCIv1.Config.User}} {{.OCIv1.Config.WorkingDir}}"
    config = buildah(env, "inspect", "--type", "image", "--format", fields, "paddlecloud.local/t/tiny:1")
    assert config == "1000 /opt/job"  # the base's USER is back after pip ran as root
    container = buildah(env, "from", "--pull-never", "paddlecloud.local/t/tiny:1")
    script = "python entry.py; command -v paddlecloud-launch; test -w entry.py || echo read-only code"
    out = buildah(env, "run", container, "--", "sh", "-c", script)
    assert out.splitlines() == [
        "tiny wheel 0.1 in /opt/job as uid 1000", "/opt/paddle/bin/paddlecloud-launch", "read-only code"
    ]
