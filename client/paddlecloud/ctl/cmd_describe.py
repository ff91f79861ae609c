"""paddlectl describe job NAME: one job told whole, as `kubectl describe` tells a pod.

The spec, the workers, the events (GET /jobs/<name>/events), and the last lines of each failed worker's
log: what answers "why did it fail" and "is it stuck" without opening a log by hand.
"""

from __future__ import annotations

from typing import Any

import click

from paddlecloud.ctl.app import AliasGroup, cli, complete_jobs, session_of
from paddlecloud.ctl.output import params_text, progress_cell, table, workers_table
from paddlecloud.sdk.jobs import job_path

FAILED_LOG_LINES = 20  # of each failed worker's log
_SPEC_SKIPPED = ("jobname", "env", "notify", "params")  # the name is above; env values may be secrets: names only


class DescribeGroup(AliasGroup):
    aliases = {"jobs": "job"}


@cli.group(cls=DescribeGroup, short_help="Show one resource in detail: job NAME.")
def describe() -> None:
    """Show one resource in detail: job NAME (its spec, workers, events and a failed worker's last lines)."""


@describe.command("job", short_help="A job's spec, workers, events and a failed worker's last log lines.")
@click.argument("job", shell_complete=complete_jobs)
@click.pass_context
def describe_job(ctx: click.Context, job: str) -> None:
    """JOB is a name (your newest run of it, or the active one) or a uid."""
    session = session_of(ctx)
    path = job_path(job)
    answer = session.get(path)
    workers = list(session.paginate(f"{path}/workers"))
    events = list(session.paginate(f"{path}/events"))
    click.echo(_header(answer))
    click.echo("\nSpec:\n" + _spec(answer.get("spec") or {}))
    click.echo("\nWorkers:\n" + _indent(workers_table(workers)))
    click.echo("\nEvents:\n" + _indent(_events_table(events)))
    for worker in workers:
        if worker.get("state") == "failed":
            params = {"worker": worker["name"], "tail": FAILED_LOG_LINES}
            text = session.get(f"{path}/logs", params).get("text") or "(empty)\n"
            click.echo(f"\nLast lines of {worker['name']}:\n" + _indent(text.rstrip("\n")))


def _header(job: dict[str, Any]) -> str:
    rows = [
        ("Name:", job.get("name")), ("Uid:", job.get("uid")), ("Owner:", job.get("owner")),
        ("Datacenter:", job.get("datacenter")), ("State:", job.get("state")), ("Reason:", job.get("reason")),
        ("Message:", job.get("message")), ("Exit code:", job.get("exit_code")), ("Priority:", job.get("priority")),
        ("Created:", job.get("created_at")), ("Started:", job.get("started_at")), ("Finished:", job.get("finished_at")),
        ("Output:", job.get("output")),
    ]  # fmt: skip
    rows += [("Warning:", f"{w.get('reason')}: {w.get('message')}") for w in job.get("warnings") or []]
    if progress := job.get("progress"):  # only where its trainers log total_steps
        steps = f"step {progress.get('step')} of {progress.get('total_steps')}"
        rows.append(("Progress:", f"{progress_cell(job)} ({steps})"))
    return _pairs([(label, "" if value is None else value) for label, value in rows])


def _spec(spec: dict[str, Any]) -> str:
    rows = [(f"{key}:", value) for key, value in spec.items() if key not in _SPEC_SKIPPED and value not in (None, "")]
    if spec.get("params"):
        rows.append(("params:", params_text(spec["params"])))
    if spec.get("env"):
        rows.append(("env:", ", ".join(sorted(spec["env"]))))
    return _indent(_pairs(rows))


def _pairs(rows: list[tuple[str, Any]]) -> str:
    """Label and value columns, aligned, without a header line."""
    return table(("", ""), rows).partition("\n")[2]


def _events_table(events: list[dict[str, Any]]) -> str:
    rows = [(e.get("time", ""), e.get("kind", ""), e.get("worker") or "", e.get("message") or "") for e in events]
    return table(("TIME", "EVENT", "WORKER", "MESSAGE"), rows, empty="No events.")


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" if line else line for line in text.splitlines())
