"""paddlectl logs: every worker's log of a job, or one's, to the end with -f; `submit -f` follows with it too."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import click

from paddlecloud.contract import states
from paddlecloud.ctl.app import cli, complete_jobs, note, session_of
from paddlecloud.sdk.errors import PaddleCloudError, describe_end
from paddlecloud.sdk.jobs import LogStream, lines, stamped_lines


def follow_logs(
    ctx: click.Context,
    job: str,
    worker: str | None,
    tail: int | None,
    follow: bool,
    prefix: bool | None,
    timestamps: bool = False,
) -> None:
    session = session_of(ctx)
    stream = LogStream(session, job, worker=worker, tail=tail, follow=follow, notify=note)
    iterator: Iterator[tuple[str, str, list[float | None]]] = stream.stamped()
    for line in _with_prefix_choice(iterator, stream, prefix, timestamps):
        click.echo(line, nl=False)
        sys.stdout.flush()
    if follow:
        end = stream.job
        message = describe_end(end)
        if end.get("state") != states.SUCCEEDED:
            raise PaddleCloudError(message)
        note(message)


Piece = tuple[str, str, list[float | None]]


def _with_prefix_choice(iterator: Iterator[Piece], stream: Any, prefix: bool | None, timestamps: bool) -> Iterator[str]:
    first = next(iterator, None)
    # The workers are known once the stream has looked the job up (before its first piece).
    use = prefix if prefix is not None else len(stream.workers) > 1
    if first is None:
        return
    pieces = _chain(first, iterator)
    if timestamps:
        yield from stamped_lines(pieces, use)
    else:
        yield from lines(((worker, text) for worker, text, _ in pieces), use)


def _chain(first: Piece, rest: Iterator[Piece]) -> Iterator[Piece]:
    yield first
    yield from rest


@cli.command(short_help="Print logs of the job (-f to follow it to the end).")
@click.option("-n", "--tail", type=click.IntRange(min=0), default=None, help="Only the last N lines of each log.")
@click.option("-w", "--worker", default=None, help="One worker: trainer-0, pserver-1, ... (default: all of them).")
@click.option("-f", "--follow", is_flag=True,
              help="Follow until the job ends; then exit 0 if it succeeded, 1 if it failed or was killed.")
@click.option("--prefix/--no-prefix", default=None, help="Start each line with [worker] (default: with several).")
@click.option("-timestamps", "--timestamps", is_flag=True,
              help="Start each line with the UTC time it was written (RFC 3339, milliseconds).")
@click.argument("job", shell_complete=complete_jobs)
@click.pass_context
def logs(ctx: click.Context, job: str, tail: int | None, worker: str | None, follow: bool,
         prefix: bool | None, timestamps: bool) -> None:
    """Print the logs of every worker of JOB (trainers, then pservers), or of one with -w."""
    if worker and worker.startswith(f"{job}-"):
        worker = worker[len(job) + 1:]  # the original's pod-style names: <job>-trainer-0
    follow_logs(ctx, job, worker, tail, follow, prefix, timestamps)
