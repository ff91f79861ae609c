"""paddlectl usage: core-, GiB- and GPU-hours your jobs held (operators: everyone's), per user, team or day."""

from __future__ import annotations

from typing import Any

import click

from paddlecloud.ctl.app import cli, session_of
from paddlecloud.ctl.output import emit, number, table
from paddlecloud.sdk.usage import GROUPS, usage, usage_csv

HEADERS = {"user": "USER", "team": "TEAM", "day": "DAY (UTC)", "job": "JOB"}


def usage_table(report: dict[str, Any]) -> str:
    # Held (what the jobs asked for, over their time), then used where measured, then storage.
    rows = [
        (row["key"], number(round(row["cpu_core_hours"], 2)), number(round(row["memory_gib_hours"], 2)),
         number(round(row["gpu_hours"], 2)), row["jobs"], row["workers"],
         number(round(row.get("cpu_core_hours_used", 0), 2)), number(round(row.get("peak_memory_gib", 0), 2)),
         number(round(row.get("storage_gib_days", 0), 2)))
        for row in report["results"]
    ]  # fmt: skip
    headers = (HEADERS.get(report["group_by"], "KEY"), "CPU CORE-H", "MEMORY GIB-H", "GPU-H", "JOBS", "WORKERS",
               "CPU-H USED", "PEAK MEM GIB", "STORAGE GIB-D")  # fmt: skip
    where = report["datacenter"] or "every datacenter"
    return table(headers, rows, empty=f"No usage in {where} from {report['since']} to {report['until']}.")


@cli.command("usage", short_help="Print the core-, memory- and GPU-hours your jobs held, per user, team or day.")
@click.option("-datacenter", "--datacenter", default=None,
              help="Only this datacenter (default: the config's current one; 'all' for every one).")
@click.option("-since", "--since", default=None,
              help="From this UTC day (YYYY-MM-DD) or ISO time; default 30 days before -until.")
@click.option("-until", "--until", default=None, help="Up to (not including) this day or time; default now.")
@click.option("-group-by", "--group-by", "group_by", type=click.Choice(GROUPS), default="user",
              help="user (default), team (Django groups), day, or job (one row per run, by its uid).")
@click.option("-user", "--user", default=None, help="Operators: only this user's usage.")
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml", "csv"]), default="table",
              help="table (default), json, yaml or csv.")
@click.pass_context
def usage_command(ctx: click.Context, datacenter: str | None, since: str | None, until: str | None, group_by: str,
                  user: str | None, output: str) -> None:  # fmt: skip
    """Sum the ledger over a window (at most 366 days): each worker of each finished job counts what it asked for
    (cores, memory, GPUs) for as long as it ran, clipped to the window. Users see their own usage; operators
    everyone's."""
    session = session_of(ctx)
    name = session.portal_datacenter if datacenter is None else datacenter
    query = {"datacenter": None if name == "all" else name, "since": since, "until": until, "group_by": group_by,
             "user": user}  # fmt: skip
    if output == "csv":
        click.echo(usage_csv(session, **query), nl=False)
        return
    report = usage(session, **query)
    emit(report, output, lambda: usage_table(report))

