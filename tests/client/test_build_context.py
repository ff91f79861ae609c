"""Runtime image build contexts: what is copied, what is refused, the Dockerfile's steps, image references."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from paddlecloud.contract.dockerfile import runtime_dockerfile, user_problem
from paddlecloud.contract.imageref import image_problem
from paddlecloud.ctl.commands import cli
from paddlecloud.sdk import build_context, builders
from paddlecloud.sdk.errors import UsageProblem

BASE = "paddlecloud.local/paddle:3.0.0"


def package(root: Path, requirements: bool = True) -> Path:
    (root / "lib").mkdir(parents=True)
    (root / "train.py").write_text("print('train')\n")
    (root / "lib" / "util.py").write_text("X = 1\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o700)
    (root / "lib" / "__pycache__").mkdir()
    (root / "lib" / "__pycache__" / "util.cpython-311.pyc").write_bytes(b"\0")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref\n")
    if requirements:
        (root / "requirements.txt").write_text("tiny==0.1\n")
    return root


def test_the_context_holds_the_package_without_caches_world_readable(tmp_path: Path) -> None:
    src = package(tmp_path / "src")
    (src / "lib" / "same.py").symlink_to("util.py")
    found = build_context.scan(src)
    context = build_context.write_context(found, tmp_path / "ctx", BASE, "/workspace", "1000")
    copied = sorted(p.relative_to(context).as_posix() for p in context.rglob("*"))
    assert copied == [
        ".dockerignore", "Dockerfile", "package", "package/lib", "package/lib/same.py", "package/lib/util.py",
        "package/requirements.txt", "package/run.sh", "package/train.py",
    ]
    assert (context / "package" / "lib" / "util.py").read_text() == "X = 1\n"
    assert (context / "package" / "lib" / "same.py").readlink() == Path("util.py")
    assert (context / "package" / "run.sh").stat().st_mode & 0o777 == 0o755
    assert (context / "package" / "train.py").stat().st_mode & 0o777 == 0o644
    assert (context / "package" / "lib").stat().st_mode & 0o777 == 0o755
    assert "package/**/__pycache__" in (context / ".dockerignore").read_text().splitlines()
    assert found.total_bytes == sum((src / f).stat().st_size for f in found.files)


def test_the_dockerfile_installs_requirements_as_root_and_gives_back_the_base_user(tmp_path: Path) -> None:
    found = build_context.scan(package(tmp_path / "src"))
    context = build_context.write_context(found, tmp_path / "ctx", BASE, "/opt/job", "1000")
    assert (context / "Dockerfile").read_text().splitlines() == [
        f"FROM {BASE}",
        "COPY package/ /opt/job/",
        "WORKDIR /opt/job",
        "USER root",
        "RUN python -m pip install --no-cache-dir -r /opt/job/requirements.txt",
        "USER 1000",
    ]


@pytest.mark.parametrize("user", ["", "root", "0"])
def test_a_root_base_needs_no_user_lines(user: str) -> None:
    text = runtime_dockerfile(BASE, "/w", True, source="package/", base_user=user)
    assert "USER" not in text
    assert "RUN python -m pip install --no-cache-dir -r /w/requirements.txt" in text


@pytest.mark.parametrize("user", ["1000", "1000:1000", "paddle", "paddle:users", "_x.y-z", "root:0"])
def test_user_and_group_names_or_ids_are_accepted(user: str) -> None:
    assert user_problem(user) is None
    assert runtime_dockerfile(BASE, "/w", True, base_user=user).endswith(f"USER {user}\n")


@pytest.mark.parametrize("user", ["1000\nRUN curl x", "a b", "a:b:c", ":1000", "1000:", "-x", "a$(id)", "x" * 33])
def test_a_user_that_is_not_user_group_never_reaches_the_dockerfile(user: str) -> None:
    assert user_problem(user) is not None
    with pytest.raises(ValueError, match="base_user"):
        runtime_dockerfile(BASE, "/w", True, base_user=user)
    with pytest.raises(ValueError, match="copy_owner"):
        runtime_dockerfile(BASE, "/w", False, copy_owner=user)


def test_the_cli_names_base_user_when_it_is_bad(tmp_path: Path) -> None:
    src = package(tmp_path / "src")
    args = ["build", str(src), "/workspace", BASE, "r.io/a/b:1", "--base-user", "1000\nRUN id"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code != 0 and "--base-user: must be user[:group]" in result.output


def test_without_requirements_there_is_no_pip_step_and_the_base_user_stays(tmp_path: Path) -> None:
    found = build_context.scan(package(tmp_path / "src", requirements=False))
    assert not found.has_requirements
    context = build_context.write_context(found, tmp_path / "ctx", BASE, "/w", None)
    text = (context / "Dockerfile").read_text()
    assert "RUN" not in text and "USER" not in text
    assert build_context.check_inputs("/w/", BASE, BASE) == "/w"  # DEST's trailing slash goes before the Dockerfile


@pytest.mark.parametrize("target", ["../outside.txt", "/etc/passwd", "lib/../../x", ".."])
def test_links_leading_out_of_the_package_are_refused(tmp_path: Path, target: str) -> None:
    src = package(tmp_path / "src")
    (tmp_path / "outside.txt").write_text("secret")
    (src / "link").symlink_to(target)
    with pytest.raises(UsageProblem, match="SRC: link is a link leading out of the package"):
        build_context.scan(src)


def test_a_linked_folder_is_copied_as_a_link_not_followed(tmp_path: Path) -> None:
    src = package(tmp_path / "src")
    (src / "alias").symlink_to("lib")
    (src / "lib" / "up").symlink_to("../train.py")  # up and back in: still inside
    found = build_context.scan(src)
    assert (Path("alias"), "lib") in [(Path(rel), t) for rel, t in found.links]
    assert not any(str(f).startswith("alias/") for f in found.files)


def test_src_must_be_a_directory_and_special_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageProblem, match="is not a directory"):
        build_context.scan(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageProblem, match="is not a directory"):
        build_context.scan(tmp_path / "file")
    src = package(tmp_path / "src")
    os.mkfifo(src / "pipe")
    with pytest.raises(UsageProblem, match="SRC: pipe is not a regular file"):
        build_context.scan(src)


def test_size_and_file_count_are_capped_before_copying(tmp_path: Path) -> None:
    src = package(tmp_path / "src")
    (src / "data.bin").write_bytes(b"x" * 3_000_000)
    with pytest.raises(UsageProblem, match="more than 2 MiB; keep data on the PFS"):
        build_context.scan(src, max_bytes=2 << 20)
    with pytest.raises(UsageProblem, match="more than 3 files; keep data on the PFS"):
        build_context.scan(src, max_files=3)


def test_the_context_folder_must_be_new_or_empty(tmp_path: Path) -> None:
    found = build_context.scan(package(tmp_path / "src"))
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "old").write_text("x")
    with pytest.raises(UsageProblem, match=r"--context: .* must be a new or empty folder"):
        build_context.write_context(found, tmp_path / "ctx", BASE, "/w", None)
    assert [p.name for p in (tmp_path / "ctx").iterdir()] == ["old"]


@pytest.mark.parametrize(
    ("dest", "rule"),
    [
        ("workspace", "must be an absolute path"),
        ("/a/../etc", "must not contain '..'"),
        ("/", "must not be the image's root folder"),
        ("/a b", "must be an absolute path"),
        ("/a;rm -rf", "must be an absolute path"),
        ("/" + "a" * 300, "at most 255 characters"),
    ],
)
def test_bad_dest_is_refused_naming_the_argument(dest: str, rule: str) -> None:
    with pytest.raises(UsageProblem, match=f"^DEST: .*{rule}"):
        build_context.check_inputs(dest, BASE, BASE)


@pytest.mark.parametrize(
    "ref",
    [
        "ubuntu",
        "paddlepaddle/paddle:3.0.0",
        "localhost:5000/alice/fit:1",
        "registry.example.com/team/sub/trainer:v1.0-rc_1",
        "127.0.0.1:5000/a/b",
        "a/b@sha256:" + "0" * 64,
        "a/b:t@sha256:" + "f" * 64,
        "a__b/c-d.e",
    ],
)
def test_valid_references(ref: str) -> None:
    assert image_problem(ref) is None


@pytest.mark.parametrize(
    ("ref", "rule"),
    [
        ("", "is required"),
        ("paddle:", "tag ''"),
        ("a/b@sha256:abc", "is not algorithm:hex"),
        ("-a/b", "path component '-a'"),
        ("a//b", "path component ''"),
        ("a/b:" + "t" * 129, "must be 1-128"),
        ("a b", "must not contain spaces"),
        ("a/b;touch x", "must not contain spaces"),
        ("oci:/tmp/layout:ref", "registry host 'oci:'"),
        ("r.io/" + "a" * 260, "the limit is 255"),
    ],
)
def test_invalid_references_name_the_rule(ref: str, rule: str) -> None:
    problem = image_problem(ref)
    assert problem is not None and rule in problem
    with pytest.raises(UsageProblem, match=r"^RUNTIME_IMAGE: "):
        build_context.check_inputs("/w", BASE, ref)
    with pytest.raises(UsageProblem, match=r"^BASE_IMAGE: "):
        build_context.check_inputs("/w", ref, BASE)


def test_builder_command_lines(tmp_path: Path) -> None:
    buildah = builders.Builder("buildah", "/usr/bin/buildah")
    assert buildah.build(tmp_path, "r.io/a:1") == [
        "/usr/bin/buildah", "build", "-f", f"{tmp_path}/Dockerfile", "-t", "r.io/a:1", str(tmp_path)
    ]
    assert buildah.push("r.io/a:1") == ["/usr/bin/buildah", "push", "r.io/a:1"]
    assert buildah.inspect_user("b") == [
        "/usr/bin/buildah", "inspect", "--type", "image", "--format", "{{.OCIv1.Config.User}}", "b"
    ]
    assert builders.Builder("docker", "docker").inspect_user("b") == [
        "docker", "image", "inspect", "--format", "{{.Config.User}}", "b"
    ]
    assert builders.manual_steps(Path("/c tx"), "r.io/a:1", push=True) == [
        "docker build -f '/c tx/Dockerfile' -t r.io/a:1 '/c tx'", "docker push r.io/a:1"
    ]


def test_no_builder_on_an_empty_path_and_a_wanted_builder_that_is_missing_is_an_error(tmp_path: Path) -> None:
    assert builders.find_builder(path=str(tmp_path)) is None
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    fake.chmod(0o755)
    assert builders.find_builder(path=str(tmp_path)) is None  # a CLI without a daemon is passed over
    with pytest.raises(UsageProblem, match="--builder: docker does not answer"):
        builders.find_builder("docker", path=str(tmp_path))
    with pytest.raises(UsageProblem, match="--builder: podman is not on PATH"):
        builders.find_builder("podman", path=str(tmp_path))
