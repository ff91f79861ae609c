"""paddlectl's queue commands: `get queue` (a datacenter's waiting jobs, in admission order) and `get priorities`."""

from __future__ import annotations

from typing import Any

import click

from paddlecloud.contract.units import parse_time
from paddlecloud.ctl import output
from paddlecloud.ctl.app import OUTPUT, get, note, session_of
from paddlecloud.ctl.output import emit, human_duration, table


def _starts(stamp: str | None) -> str:
    """An estimated time as "in 5m" (by the scheduler's plan: the docs, The queue); "-" where there is none."""
    when = parse_time(stamp)
    if when is None:
        return "-"
    seconds = (when - output.now()).total_seconds()
    return f"in {human_duration(seconds)}" if seconds > 0 else "any time now"


def queue_table(rows: list[dict[str, Any]]) -> str:
    """POSITION, JOB ("-" for another user's), OWNER, PRIORITY, REASON, WAITED, STARTS, ENDS, FROM."""
    lines = [
        ("-" if r.get("position") is None else r["position"], r.get("job") or "-", r.get("owner", ""),
         r.get("priority", ""), r.get("reason") or "", human_duration(float(r.get("waited") or 0)),
         _starts(r.get("estimated_start")), _starts(r.get("estimated_end")), r.get("estimate_basis") or "-")
        for r in rows
    ]  # fmt: skip
    headers = ("POSITION", "JOB", "OWNER", "PRIORITY", "REASON", "WAITED", "STARTS", "ENDS", "FROM")
    return table(headers, lines, empty="No jobs are waiting.")


@get.command("queue", short_help="List the jobs waiting in a datacenter, in the order they will start.")
@click.option("-datacenter", "--datacenter", default=None, help="Datacenter (default: the config's current one).")
@click.option("-o", "--output", "output_format", type=OUTPUT, default="table")
@click.pass_context
def get_queue(ctx: click.Context, datacenter: str | None, output_format: str) -> None:
    """POSITION (held jobs: -), JOB (another user's: -), OWNER, PRIORITY, REASON, WAITED, STARTS, ENDS, FROM.

    The order is the scheduler's, replayed as the running jobs end: priority first, then fair share (who has used
    least lately), then age. On a Kueue datacenter the jobs Kueue holds come first, numbered in each owner's own
    queue (Kueue's order). STARTS and ENDS replay that plan over the jobs' expected run times; FROM says what those
    rest on, the least sure: progress (the running jobs' steps per second), history (earlier runs of the same
    name), average (the datacenter's recent jobs); "-": nothing to estimate from. Jobs submitted later may still
    go first."""
    session = session_of(ctx)
    answer = session.get("/queue", {"datacenter": datacenter or session.portal_datacenter})
    rows = answer.get("results") or []
    emit(answer if output_format != "table" else rows, output_format, lambda: queue_table(rows))
    if answer.get("truncated") and output_format == "table":
        note(f"the first {len(rows)} of {answer.get('count')} waiting jobs are shown")


@get.command("priorities", short_help="List the priority classes you may submit with (-priority).")
@click.option("-o", "--output", "output_format", type=OUTPUT, default="table")
@click.pass_context
def get_priorities(ctx: click.Context, output_format: str) -> None:
    """NAME, VALUE (higher starts first), DESCRIPTION."""
    items = list(session_of(ctx).paginate("/priorities"))
    rows = [(p["name"], p["value"], p.get("description") or "") for p in items]
    emit(items, output_format, lambda: table(("NAME", "VALUE", "DESCRIPTION"), rows, empty="No priority classes."))
