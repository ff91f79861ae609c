"""paddlectl's file commands on the PFS: cp, put, get, ls, mkdir, rm (under `file`, and cp/ls/mkdir/rm at the top)."""

from __future__ import annotations

from typing import Any

import click

from paddlecloud.ctl.app import OUTPUT, AliasGroup, cli, parse_chunk_size, session_of, warn
from paddlecloud.ctl.output import BarProgress, emit, human_bytes, ls_table
from paddlecloud.sdk.errors import APIError, PaddleCloudError, UsageProblem
from paddlecloud.sdk.files import Files, check_remote, is_remote


def _files(ctx: click.Context) -> Files:
    return Files(session_of(ctx))


def _remote(ctx: click.Context, path: str) -> str:
    return check_remote(path, session_of(ctx))


def _copy(ctx: click.Context, paths: tuple[str, ...], chunk_size: str | None, direction: str | None) -> None:
    if len(paths) < 2:
        raise UsageProblem("give SRC and DEST (for example: paddlectl file cp ./data /pfs/<dc>/home/<user>/data)")
    sources, dest = list(paths[:-1]), paths[-1]
    if direction == "put" and not is_remote(dest):
        raise UsageProblem(f"DEST {dest!r} must be a /pfs/ path (file put uploads)")
    if direction == "get" and not all(is_remote(s) for s in sources):
        raise UsageProblem("SRC must be /pfs/ paths (file get downloads)")
    chunk = parse_chunk_size(chunk_size)
    files = _files(ctx)
    summary = files.copy(sources, dest, BarProgress(), chunk)
    for skipped in summary.skipped:
        warn(f"skipped {skipped}")
    verb = "uploaded" if is_remote(dest) else "downloaded"
    reused = f"; {summary.chunks_reused} chunks were already there" if summary.chunks_reused else ""
    click.echo(f"{verb} {summary.files} file{'s' if summary.files != 1 else ''} "
               f"({human_bytes(summary.bytes)}B) to {dest}{reused}")


CP_HELP = """Copy files to (upload) or from (download) the PFS; directories are copied recursively.

\b
SRC (no trailing slash) copies the directory itself: DEST/SRC/...
SRC/ (trailing slash) copies what is inside it:      DEST/...
A file goes to DEST/name when DEST ends with / or is a directory.
An interrupted copy resumes where it stopped when run again.
"""


@click.command("cp", help=CP_HELP, short_help="Upload or download files (resumable).")
@click.option("-r", "--recursive", is_flag=True, hidden=True, help="Accepted; directories are always recursive.")
@click.option("-chunk-size", "--chunk-size", "chunk_size", default=None, metavar="SIZE",
              help="Upload chunk size, a multiple of 64Ki (default: the portal's).")
@click.argument("paths", nargs=-1, metavar="SRC... DEST")
@click.pass_context
def cp(ctx: click.Context, paths: tuple[str, ...], recursive: bool, chunk_size: str | None) -> None:
    _copy(ctx, paths, chunk_size, None)


@click.command("put", short_help="Upload files (file cp with a /pfs/ DEST).")
@click.option("-chunk-size", "--chunk-size", "chunk_size", default=None, metavar="SIZE")
@click.argument("paths", nargs=-1, metavar="SRC... DEST")
@click.pass_context
def put(ctx: click.Context, paths: tuple[str, ...], chunk_size: str | None) -> None:
    """Upload local files or directories to the PFS (the original `file put`)."""
    _copy(ctx, paths, chunk_size, "put")


@click.command("get", short_help="Download files (file cp with /pfs/ SRC).")
@click.argument("paths", nargs=-1, metavar="SRC... DEST")
@click.pass_context
def file_get(ctx: click.Context, paths: tuple[str, ...]) -> None:
    """Download files or directories from the PFS."""
    _copy(ctx, paths, None, "get")


@click.command("ls", short_help="List files on PaddlePaddle Cloud.")
@click.option("-r", "--recursive", is_flag=True, help="List the whole tree.")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.pass_context
def ls(ctx: click.Context, paths: tuple[str, ...], recursive: bool, output: str) -> None:
    """List PATH (default: your home on the current datacenter): NAME, KIND, SIZE, MODIFIED."""
    files = _files(ctx)
    targets = [_remote(ctx, p) for p in paths] or [files.session.home]
    everything: list[dict[str, Any]] = []
    for index, target in enumerate(targets):
        items = list(files.ls(target, recursive))
        everything.extend(items)
        if output == "table":
            if len(targets) > 1:
                click.echo(("\n" if index else "") + f"{target}:")
            entry_is_file = len(items) == 1 and items[0]["path"].rstrip("/") == target.rstrip("/")
            base = target.rsplit("/", 1)[0] if entry_is_file else target
            click.echo(ls_table(items, base))
    if output != "table":
        emit(everything, output, lambda: "")


@click.command("mkdir", short_help="Make directories on PaddlePaddle Cloud.")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.pass_context
def mkdir(ctx: click.Context, paths: tuple[str, ...]) -> None:
    """Create each PATH and its missing parents (an existing directory is fine)."""
    files = _files(ctx)
    for path in paths:
        entry, created = files.mkdir(_remote(ctx, path), parents=True)
        click.echo(f"{'created' if created else 'exists'} {entry['path']}")


@click.command("rm", short_help="Remove files on PaddlePaddle Cloud.")
@click.option("-r", "--recursive", is_flag=True, help="Remove directories and everything in them.")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.pass_context
def rm(ctx: click.Context, paths: tuple[str, ...], recursive: bool) -> None:
    """Remove each PATH (a directory only with -r)."""
    files = _files(ctx)
    for path in paths:
        target = _remote(ctx, path)
        try:
            removed = files.rm(target, recursive)
        except APIError as exc:
            if exc.code == "is_a_directory" and not recursive:
                raise PaddleCloudError(f"{target.rstrip('/')} is a directory; use rm -r to remove it and "
                                       "everything in it") from None
            raise
        entries = int(removed.get("removed_entries", 0))
        click.echo(f"removed {removed['path']} ({entries} entr{'y' if entries == 1 else 'ies'}, "
                   f"{human_bytes(int(removed.get('removed_bytes', 0)))}B)")


@cli.group(cls=AliasGroup, short_help="Simple file operations: cp, ls, mkdir, rm (and put, get).")
def file() -> None:
    """Files on the PFS: /pfs/<datacenter>/home/<user>/... (yours) and /pfs/<datacenter>/public/..."""


for _command in (cp, ls, mkdir, rm):
    file.add_command(_command)
    cli.add_command(_command)
file.add_command(put)
file.add_command(file_get)
