"""paddlectl's image build commands: images, image-status, image-logs, image-cancel (and `remote_build`,
which `paddlectl build --remote` calls)."""

from __future__ import annotations

from typing import Any

import click

from paddlecloud.contract.states import SUCCEEDED
from paddlecloud.ctl.app import OUTPUT, cli, note, session_of
from paddlecloud.ctl.output import builds_table, emit
from paddlecloud.sdk import images
from paddlecloud.sdk.errors import PaddleCloudError


def remote_build(
    ctx: click.Context,
    package: str,
    image: str,
    registry: str,
    base_image: str = "",
    datacenter: str | None = None,
    follow: bool = True,
) -> dict[str, Any]:
    """Build in the cluster: PACKAGE (a local directory, uploaded first, or a /pfs/ folder) -> IMAGE,
    pushed with registry secret REGISTRY. What `paddlectl build --remote` runs.

    With `follow`, print the builder's log until it ends and fail (exit 1) unless it succeeded.
    """
    session = session_of(ctx)
    folder = images.package_folder(session, package, datacenter)
    build = images.request_build(session, folder, image, registry, base_image, datacenter)
    note(f"image build {build['uid']} of {image} queued on {build['datacenter']}")
    if not follow:
        return build
    for text in images.build_log(session, build["uid"], follow=True):
        click.echo(text, nl=False)
    build = images.wait_build(session, build["uid"])
    if build["state"] != SUCCEEDED:
        raise PaddleCloudError(f"image build {build['uid']} {build['state']}: {build.get('message') or ''}")
    note(f"pushed {build['image']} ({build.get('digest') or 'digest unknown'})")
    return build


@cli.command("images", short_help="List your in-cluster image builds (newest first).")
@click.option("-active", "--active", is_flag=True, help="Only builds still queued or building.")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.pass_context
def list_images(ctx: click.Context, active: bool, output: str) -> None:
    builds = list(images.list_builds(session_of(ctx), active))
    emit(builds, output, lambda: builds_table(builds))


@cli.command("image-status", short_help="Show one image build: its state and the builder's last error.")
@click.argument("uid")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.pass_context
def image_status(ctx: click.Context, uid: str, output: str) -> None:
    build = images.get_build(session_of(ctx), uid)
    emit(build, output, lambda: builds_table([build]))


@cli.command("image-logs", short_help="Print (or follow) the builder's log of an image build.")
@click.argument("uid")
@click.option("-f", "--follow", is_flag=True, help="Follow the log until the build ends.")
@click.pass_context
def image_logs(ctx: click.Context, uid: str, follow: bool) -> None:
    for text in images.build_log(session_of(ctx), uid, follow=follow):
        click.echo(text, nl=False)


@cli.command("image-cancel", short_help="Cancel a queued or running image build.")
@click.argument("uid")
@click.pass_context
def image_cancel(ctx: click.Context, uid: str) -> None:
    build = images.cancel_build(session_of(ctx), uid)
    click.echo(f"image build {build['uid']}: {build['state']}")
