"""paddlectl build SRC DEST BASE_IMAGE RUNTIME_IMAGE: a runtime image from a trainer package, on this machine."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import click

from paddlecloud.contract.dockerfile import DEFAULT_DEST, user_problem
from paddlecloud.ctl import cmd_images
from paddlecloud.ctl.app import cli, note
from paddlecloud.sdk import build_context, builders
from paddlecloud.sdk.errors import UsageProblem

ROOT_HINT = "1000 for PaddleCloud's runtime image, root for paddlepaddle/paddle"


def _check_remote(dest: str, registry: str) -> None:
    """The in-cluster build (POST /api/v1/images) always pushes, to the registry secret's server."""
    if not registry:
        raise UsageProblem("--registry: --remote pushes with one of your registry secrets; name it")
    if dest != DEFAULT_DEST:
        raise UsageProblem(f"DEST: the in-cluster builder puts the package at {DEFAULT_DEST}; pass that")


def _context_dir(given: Path | None) -> tuple[Path, bool]:
    """Where to write the context, and whether paddlectl made it (and removes it after a build)."""
    if given is not None:
        return given, False
    return Path(tempfile.mkdtemp(prefix="paddlectl-build-")), True


@cli.command(short_help="Build a runtime image: a trainer package on a base image (buildah, podman, docker).")
@click.argument("src", type=click.Path(path_type=Path))
@click.argument("dest")
@click.argument("base_image")
@click.argument("runtime_image")
@click.option("--push", "-push", is_flag=True, help="Push RUNTIME_IMAGE after building it.")
@click.option("--context", "-context", "context_dir", type=click.Path(path_type=Path), default=None,
              help="Write the build context here (a new or empty folder; kept). Default: a temporary folder.")
@click.option("--builder", "-builder", type=click.Choice(builders.BUILDERS), default=None,
              help="Use this builder (default: the first working one of buildah, podman, docker).")
@click.option("--base-user", "-base-user", default=None,
              help=f"BASE_IMAGE's USER, restored after pip runs as root (default: asked of the builder; {ROOT_HINT}).")
@click.option("--remote", "-remote", is_flag=True,
              help="Build in the cluster instead (no builder needed here): SRC is uploaded (or a /pfs/ folder), "
                   f"DEST must be {DEFAULT_DEST}, and the image is pushed with --registry.")
@click.option("--registry", "-registry", default="", help="With --remote: the registry secret to push with.")
@click.option("--datacenter", "-datacenter", default=None, help="With --remote: the datacenter that builds.")
@click.option("--detach", "-detach", is_flag=True, help="With --remote: print the build's id and return at once.")
@click.pass_context
def build(ctx: click.Context, src: Path, dest: str, base_image: str, runtime_image: str, push: bool,
          context_dir: Path | None, builder: str | None, base_user: str | None, remote: bool, registry: str,
          datacenter: str | None, detach: bool) -> None:
    """Copy the trainer package SRC to DEST in an image FROM BASE_IMAGE, install SRC/requirements.txt
    (when there is one) with pip, and tag the result RUNTIME_IMAGE (as the original tools/build_docker.sh).

    With no working builder, print the commands to run elsewhere and where the build context is.

    \b
    paddlectl build ./fit_a_line /workspace registry.example.com/paddlecloud/paddle:3.0.0 \\
        registry.example.com/alice/fit:1 --push
    """
    dest = build_context.check_inputs(dest, base_image, runtime_image)
    problem = None if base_user is None else user_problem(base_user)
    if problem:
        raise UsageProblem(f"--base-user: {problem}")
    if remote:
        _check_remote(dest, registry)
        cmd_images.remote_build(ctx, str(src), runtime_image, registry, base_image, datacenter, follow=not detach)
        return
    package = build_context.scan(src)
    found = builders.find_builder(builder)
    if package.has_requirements and base_user is None:
        if found is None:
            raise UsageProblem(f"--base-user is required without a builder when SRC has requirements.txt ({ROOT_HINT})")
        base_user = builders.base_user(found, base_image)
    context, made_here = _context_dir(context_dir)
    try:
        build_context.write_context(package, context, base_image, dest, base_user)
        if found is None:
            click.echo(f"no working image builder here (buildah, podman, or docker with a daemon); context: {context}")
            click.echo("build it with (podman and buildah take the same arguments):")
            for line in builders.manual_steps(context, runtime_image, push):
                click.echo(f"  {line}")
            made_here = False  # the user needs it
            return
        builders.run(found.build(context, runtime_image), f"{found.name} build {runtime_image}")
        note(f"built {runtime_image} with {found.name}: {package.root} at {dest} on {base_image}")
        if push:
            builders.run(found.push(runtime_image), f"{found.name} push {runtime_image}")
            note(f"pushed {runtime_image}")
    finally:
        if made_here:
            shutil.rmtree(context, ignore_errors=True)
