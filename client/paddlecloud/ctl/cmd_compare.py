"""paddlectl compare JOB...: runs side by side, one row each: state, every param, the last value of every metric
trainer 0 logged, and the best of one metric (by its goal) with the step it was last logged at."""

from __future__ import annotations

from typing import Any

import click

from paddlecloud.contract.keeping import GOALS
from paddlecloud.ctl.app import OUTPUT, cli, complete_jobs, session_of
from paddlecloud.ctl.output import emit, metric_cell, table
from paddlecloud.sdk import metrics
from paddlecloud.sdk.errors import UsageProblem
from paddlecloud.sdk.jobs import get

MAX_JOBS = 50  # runs in one comparison: each is one job read and its metrics read to the end


def compared(session: Any, names: tuple[str, ...], metric: str | None, goal: str) -> list[dict[str, Any]]:
    """One entry per job: name, uid, state, params, `metrics` (each one's last value), and `metric`'s best, last
    and step."""
    rows = []
    for name in names:
        job = get(session, name)
        logged = metrics.points(session, job["uid"])
        last: dict[str, Any] = {}
        for point in logged:
            last.update(point["values"])
        chosen = metric or ("loss" if "loss" in last else None)
        rows.append({
            "name": job["name"], "uid": job["uid"], "state": job["state"],
            "params": (job.get("spec") or {}).get("params") or {}, "metrics": last,
            "metric": chosen, "goal": goal, **(metrics.best_and_last(logged, chosen, goal) if chosen else {}),
        })  # fmt: skip
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    params = sorted({name for row in rows for name in row["params"]})
    names = sorted({name for row in rows for name in row["metrics"]})
    chosen = sorted({row["metric"] for row in rows if row["metric"]})
    headers = ["JOB", "STATE", *params, *names, *(f"BEST {m}" for m in chosen), "STEP"]
    lines = []
    for row in rows:
        best = [metric_cell(row.get("best")) if row["metric"] == m else "-" for m in chosen]
        values = [metric_cell(row["params"].get(p)) for p in params]
        lasts = [metric_cell(row["metrics"].get(n)) for n in names]
        lines.append([row["name"], row["state"], *values, *lasts, *best, metric_cell(row.get("step"))])
    return table(headers, lines)


@cli.command(short_help="Compare runs side by side: params, last metrics and the best of one.")
@click.option("-metric", "--metric", default=None, metavar="NAME",
              help="The metric whose best value to show (default: loss, where the runs log it).")
@click.option("-goal", "--goal", type=click.Choice(GOALS), default="minimize", show_default=True,
              help="Whether the best value of -metric is its lowest or its highest.")
@click.option("-o", "--output", type=OUTPUT, default="table", help="table (default), json or yaml.")
@click.argument("jobs", nargs=-1, required=True, shell_complete=complete_jobs)
@click.pass_context
def compare(ctx: click.Context, jobs: tuple[str, ...], metric: str | None, goal: str, output: str) -> None:
    """One row per JOB (a name or uid): STATE, each param, the last value of each metric trainer 0 logged, the
    best value of -metric and the last STEP. The trials of an experiment: paddlectl get experiment NAME."""
    if len(jobs) > MAX_JOBS:
        raise UsageProblem(f"compare: at most {MAX_JOBS} jobs at once, got {len(jobs)}")
    rows = compared(session_of(ctx), jobs, metric, goal)
    emit(rows, output, lambda: render(rows))
