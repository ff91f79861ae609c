"""The job spec checked before it is sent, with the portal's own rules (paddlecloud.contract) and the flag named.

The portal checks everything again (and a dry run asks it about quotas, registries, datacenters and
the name before any upload); these checks only save a round trip and say which flag is wrong.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from paddlecloud.contract import keeping, predecessors
from paddlecloud.contract import spec as rules
from paddlecloud.sdk.errors import UsageProblem

# Spec field -> the submit flag that sets it (for messages), as the original paddlectl named them.
FLAGS = {
    "jobname": "-jobname",
    "datacenter": "-datacenter",
    "package": "PACKAGE",
    "entry": "-entry",
    "parallelism": "-parallelism",
    "min_parallelism": "-parallelism",
    "pservers": "-pservers",
    "cpu": "-cpu",
    "memory": "-memory",
    "gpu": "-gpu",
    "pscpu": "-pscpu",
    "psmemory": "-psmemory",
    "passes": "-passes",
    "image": "-image",
    "registry": "-registry",
    "env": "-env",
    "params": "-param",
    "after": "-after",
    "resume_from": "-resume-from",
    "keep": "-keep",
    "max_retries": "-max-retries",
    "max_restarts": "-max-restarts",
    "pending_timeout": "-pending-timeout",
    "stall_timeout": "-stall-timeout",
    "stall_action": "-stall-action",
    "notify": "-notify",
    "priority": "-priority",
    "no_preempt": "-no-preempt",
}

def parse_env(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """['A=1', 'B=x=y'] -> {'A': '1', 'B': 'x=y'}; a pair without '=' is refused."""
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise UsageProblem(f"-env: {pair!r} must be NAME=VALUE")
        problem = rules.env_name_problem(name)
        if problem:
            raise UsageProblem(f"-env: {problem}")
        env[name] = value
    return env


def parse_params(pairs: tuple[str, ...] | list[str]) -> dict[str, rules.ParamValue]:
    """['lr=0.003', 'batch=64', 'amp=true'] -> {'lr': 0.003, 'batch': 64, 'amp': True}; the rule broken named."""
    params: dict[str, rules.ParamValue] = {}
    for pair in pairs:
        try:
            name, value = rules.parse_param(pair)
        except ValueError as exc:
            raise UsageProblem(f"-param: {exc}") from None
        params[name] = value
    if len(params) > rules.MAX_PARAMS:
        raise UsageProblem(f"-param: at most {rules.MAX_PARAMS} parameters (got {len(params)})")
    return params


def check(spec: dict[str, Any], flags: dict[str, str] | None = None) -> dict[str, Any]:
    """Raise UsageProblem naming the flag (or SDK parameter) of the first rule broken; return the spec."""
    names = {**FLAGS, **(flags or {})}
    for field, problem in _problems(spec):
        if problem:
            raise UsageProblem(f"{names.get(field, field)}: {problem}")
    return spec


def _problems(spec: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    """(field, problem or None) for each rule in turn; lazily, so checking stops at the first problem."""
    yield "jobname", rules.job_name_problem(str(spec.get("jobname") or ""))
    yield "entry", rules.entry_problem(spec.get("entry"))
    for field in rules.LIMITS:
        if spec.get(field) is not None:
            yield field, rules.integer_problem(field, spec[field])
    for field in rules.QUANTITIES:
        if spec.get(field) is not None:
            yield field, rules.quantity_problem(field, spec[field])
    if spec.get("stall_action") not in (None, *rules.STALL_ACTIONS):
        yield "stall_action", f"must be one of {', '.join(rules.STALL_ACTIONS)}"
    if spec.get("min_parallelism") is not None:
        sizes = (int(spec["min_parallelism"]), int(spec.get("parallelism") or 1), int(spec.get("pservers") or 0))
        yield "min_parallelism", rules.elastic_problem(*sizes)
    yield "env", rules.env_problem(spec.get("env") or {}, int(spec.get("pservers") or 0))
    bad_param = rules.params_problem(spec.get("params") or {})
    if bad_param:
        yield "params", f"{bad_param[0]}: {bad_param[1]}"
    yield from _pipeline_problems(spec)
    for field, most in (("registry", rules.MAX_REGISTRY), ("image", rules.MAX_IMAGE), ("priority", rules.MAX_PRIORITY)):
        if len(spec.get(field) or "") > most:
            yield field, f"must be at most {most} characters"


def _pipeline_problems(spec: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    """Where the job starts from (the jobs it starts after, the checkpoint it resumes from) and what it leaves."""
    if spec.get("after"):
        yield "after", predecessors.after_problem(spec["after"])
    if spec.get("resume_from") is not None:
        yield "resume_from", predecessors.resume_from_problem(spec["resume_from"])
    bad_keep = keeping.policy_problem(spec["keep"]) if spec.get("keep") is not None else None
    if bad_keep:
        yield "keep", f"{bad_keep[0]}: {bad_keep[1]}"


def flag_message(error_fields: list[dict[str, Any]], detail: str, flags: dict[str, str] | None = None) -> str:
    """The portal's field errors with submit's flag names: 'jobname: ...' -> '-jobname: ...'."""
    names = {**FLAGS, **(flags or {})}
    parts = []
    for error in error_fields:
        field = str(error.get("field") or "")
        base = field.split(".", 1)[0].split("[", 1)[0]
        label = names.get(base, field)
        parts.append(f"{label}: {error.get('message')}" if field else str(error.get("message")))
    return "; ".join(parts) if parts else detail
