"""paddlectl get experiments / get experiment NAME: experiments (made with `submit -sweep`) and their trials."""

from __future__ import annotations

from typing import Any

import click

from paddlecloud.ctl.app import OUTPUT, get, session_of
from paddlecloud.ctl.output import age, emit, metric_cell, params_text, table
from paddlecloud.sdk import experiments


def _counts(experiment: dict[str, Any]) -> str:
    trials = experiment.get("trials") or {}
    return f"{trials.get('succeeded', 0)}/{trials.get('total', 0)}"


@get.command("experiments", short_help="List your experiments (newest first).")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.pass_context
def get_experiments(ctx: click.Context, output: str) -> None:
    """NAME, STATE, SUCCEEDED (of all trials), BEST (its metric and trial), AGE, MESSAGE."""
    items = list(experiments.list_all(session_of(ctx)))

    def render() -> str:
        rows = []
        for e in items:
            best = e.get("best_trial")
            shown = f"{metric_cell(best['best'])} (trial {best['index']})" if best else "-"
            rows.append((e["name"], e["state"], _counts(e), shown, age(e.get("created_at")), e.get("message") or ""))
        return table(("NAME", "STATE", "SUCCEEDED", "BEST", "AGE", "MESSAGE"), rows, empty="No experiments.")

    emit(items, output, render)


@get.command("experiment", short_help="Show an experiment's trials, the best first by its metric.")
@click.option("-sort", "--sort", "ordering", default="metric", show_default=True,
              type=click.Choice(["metric", "index", "best", "-best", "last", "-last", "steps", "-steps"]),
              help="The trials' order: by the metric (the best first), or a column.")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.argument("name")
@click.pass_context
def get_experiment(ctx: click.Context, name: str, ordering: str, output: str) -> None:
    """One row per trial: INDEX, PARAMS, STATE, BEST and LAST value of the metric, STEPS, JOB."""
    session = session_of(ctx)
    experiment = experiments.get(session, name)
    trials = list(experiments.trials(session, name, ordering))
    if output in ("json", "yaml"):
        emit({**experiment, "trial_list": trials}, output, str)
        return
    metric = ((experiment.get("sweep") or {}).get("metric") or {}).get("name", "")
    click.echo(f"{experiment['name']}  {experiment['state']}  {_counts(experiment)} succeeded"
               f"{'  metric ' + metric if metric else ''}  {experiment.get('message') or ''}".rstrip())  # fmt: skip
    rows = [(t["index"], params_text(t["params"]), t["state"], metric_cell(t.get("best")), metric_cell(t.get("last")),
             "-" if t.get("steps") is None else t["steps"], t.get("job") or "-") for t in trials]  # fmt: skip
    click.echo(table(("INDEX", "PARAMS", "STATE", "BEST", "LAST", "STEPS", "JOB"), rows, empty="No trials."))
