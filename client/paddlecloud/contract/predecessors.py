"""A job's predecessors: the jobs it starts after (`after`, `-after NAME[:ok|any|failed]`) and the run whose
checkpoint it starts from (`resume_from`, `-resume-from JOB[:STEP]`); the rules, shared by paddlectl and the portal."""

from __future__ import annotations

import re

from paddlecloud.contract.spec import job_name_problem

MAX_AFTER = 16  # dependencies of one job
AFTER_CONDITIONS = ("ok", "any", "failed")  # how the job it waits for must end: succeeded, at all, not succeeded


def parse_after(text: object) -> tuple[str, str]:
    """`NAME[:ok|any|failed]` (ok when left out) as (name, condition); ValueError saying the rule."""
    if not isinstance(text, str):
        raise ValueError("each must be a job's name, then :ok, :any or :failed (ok when left out)")
    name, _, condition = text.partition(":")
    condition = condition or "ok"
    if condition not in AFTER_CONDITIONS:
        raise ValueError(f"{text[:60]!r}: the condition is one of {', '.join(AFTER_CONDITIONS)}")
    problem = job_name_problem(name)
    if problem:
        raise ValueError(f"{text[:60]!r}: {problem}")
    return name, condition


def after_problem(after: object) -> str | None:
    """What is wrong with a spec's `after` (the jobs it starts after), or None."""
    if not isinstance(after, list):
        return "must be a list of NAME[:ok|any|failed]"
    if len(after) > MAX_AFTER:
        return f"at most {MAX_AFTER} jobs (got {len(after)})"
    try:
        names = [parse_after(item)[0] for item in after]
    except ValueError as exc:
        return str(exc)
    if len(set(names)) != len(names):
        return "names a job twice"
    return None


_RESUME_FROM = re.compile(r"([a-z0-9][-a-z0-9]{0,59})(?::([0-9]{1,12}))?")


def parse_resume_from(text: str) -> tuple[str, int | None]:
    """`JOB[:STEP]` (a job's name or uid, and a checkpoint's step: its latest when left out); ValueError if not."""
    found = _RESUME_FROM.fullmatch(text)
    if found is None:
        raise ValueError("must be JOB or JOB:STEP: a job of yours (its name or uid) and a checkpoint's step")
    return found.group(1), int(found.group(2)) if found.group(2) else None


def resume_from_problem(text: object) -> str | None:
    """What is wrong with a spec's `resume_from` ("" is fine: never resume), or None."""
    if not isinstance(text, str):
        return "must be a string, JOB or JOB:STEP"
    try:
        if text:
            parse_resume_from(text)
    except ValueError as exc:
        return str(exc)
    return None
