"""paddlectl metrics JOB: the last value of every metric each trainer logged with paddlecloud.metrics.log; and
paddlectl get checkpoints JOB: what it saved with paddlecloud.checkpoint."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from paddlecloud.ctl.app import OUTPUT, cli, complete_jobs, get, session_of
from paddlecloud.ctl.output import emit, human_bytes, human_duration, metric_cell
from paddlecloud.ctl.output import table as ctable
from paddlecloud.sdk.jobs import job_path
from paddlecloud.sdk.metrics import last_values


def table(found: dict[str, dict[str, Any]]) -> list[str]:
    names = sorted({name for row in found.values() for name in row["values"]})
    rows = [["WORKER", "STEP", *names]]
    for worker, row in found.items():
        cells = (f"{row['values'][n]:.6g}" if n in row["values"] else "-" for n in names)
        rows.append([worker, str(row["step"]), *cells])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(r, widths, strict=True)).rstrip() for r in rows]


@cli.command(short_help="Print the last metric values (loss...) of each trainer of a job.")
@click.option("-o", "--output", type=OUTPUT, default="table", help="table (default), json or yaml.")
@click.argument("job", shell_complete=complete_jobs)
@click.pass_context
def metrics(ctx: click.Context, job: str, output: str) -> None:
    """Print, for each trainer of JOB, its last step and the last value of every metric it logged."""
    found_job, found = last_values(session_of(ctx), job)
    if output == "table":
        if not found:
            click.echo(f"job {found_job['name']}: no metrics yet (log them with paddlecloud.metrics.log)", err=True)
            return
        for line in table(found):
            click.echo(line)
    elif output == "json":
        click.echo(json.dumps(found, indent=2))
    else:
        import yaml  # noqa: PLC0415 - paddlectl imports PyYAML only where it is used

        click.echo(yaml.safe_dump(found, sort_keys=False), nl=False)


@get.command("checkpoints", short_help="List a job's checkpoints: step, saved, size, metric, path.")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.argument("job", shell_complete=complete_jobs)
@click.pass_context
def get_checkpoints(ctx: click.Context, job: str, output: str) -> None:
    """STEP, SAVED (how long ago), SIZE, METRIC (what save(metric=) was given) and PATH of each checkpoint the run
    saved with paddlecloud.checkpoint; copy one with `paddlectl file cp PATH DIR`, start from one with
    `submit -resume-from JOB:STEP`."""
    session = session_of(ctx)
    found = session.get(f"{job_path(job)}/checkpoints")
    rows = []
    for c in found["checkpoints"]:
        size = human_bytes(c["size"]) + ("" if c["complete_size"] else "+")  # + : more files than were counted
        metric = metric_cell(c["metric"])
        rows.append((c["step"], human_duration(time.time() - c["time"]), size, metric, c["path"]))
    emit(found, output, lambda: ctable(("STEP", "SAVED", "SIZE", "METRIC", "PATH"), rows,
                                       empty=f"job {job}: no checkpoints (save them with paddlecloud.checkpoint)"))
