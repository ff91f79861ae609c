"""The job spec checked before it is sent, with the portal's rules (jobs/spec.py) and the flag named.

The portal checks everything again; these checks only save a round trip (and an upload) and say
which flag is wrong. Quotas, registries and datacenters are the portal's to check.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from paddlecloud.ctl.errors import UsageProblem

MAX_NAME = 40
_QUANTITY = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)([eE][+-]?\d+)?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RESERVED_ENV_PREFIXES = ("PADDLECLOUD_", "PADDLE_")
RESERVED_ENV_NAMES = frozenset(
    {"TRAINING_ROLE", "POD_IP", "TRAINER_ID", "TRAINERS", "FLAGS_enable_pir_api", "PATH", "VIRTUAL_ENV",
     "JOB_COMPLETION_INDEX"}
)
CPU_EXAMPLES = "a number of cores such as 2, 0.5 or 500m"
MEMORY_EXAMPLES = "1Gi, 1G or 512Mi"

# Spec field -> the submit flag that sets it (for messages), as the original paddlectl named them.
FLAGS = {
    "jobname": "-jobname",
    "datacenter": "-datacenter",
    "package": "PACKAGE",
    "entry": "-entry",
    "parallelism": "-parallelism",
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
    "max_retries": "-max-retries",
    "pending_timeout": "-pending-timeout",
}

# (minimum, maximum) of the integer fields, as the portal has them.
LIMITS = {
    "parallelism": (1, 1000),
    "pservers": (0, 100),
    "gpu": (0, 64),
    "passes": (1, 100000),
    "max_retries": (0, 10),
    "pending_timeout": (1, 7 * 86400),
}


def job_name_problem(value: str) -> str | None:
    """What is wrong with a job name (a DNS-1035 label of at most 40 characters), or None."""
    if not value:
        return "must not be empty"
    if len(value) > MAX_NAME:
        return f"must be at most {MAX_NAME} characters (got {len(value)})"
    if "_" in value:
        return "'_' is not allowed in DNS names; use '-'"
    if "." in value:
        return "'.' is not allowed; use '-'"
    if value != value.lower():
        return "must be lowercase"
    if not (value[0].isascii() and value[0].isalpha()):
        return "must start with a letter (a-z)"
    bad = sorted({c for c in value if not (c.isascii() and (c.isalnum() or c == "-"))})
    if bad:
        return f"may contain only a-z, 0-9 and '-' (found {', '.join(map(repr, bad))})"
    if value.endswith("-"):
        return "must end with a letter or digit"
    return None


def parse_quantity(value: str) -> Decimal | None:
    """A Kubernetes quantity ('500m', '1.5', '2Gi', '1e3') as a number, or None if it is not one."""
    match = _QUANTITY.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        return None
    number, exponent, suffix = match.groups()
    try:
        amount = Decimal(number) * (Decimal(10) ** int(exponent[1:])) if exponent else Decimal(number)
    except (InvalidOperation, ValueError):
        return None
    suffix = suffix or ""
    if suffix in _BINARY:
        return amount * (Decimal(1024) ** _BINARY[suffix])
    return amount * (Decimal(10) ** _DECIMAL[suffix])


def quantity_problem(value: Any, field: str, examples: str) -> str | None:
    amount = parse_quantity(str(value))
    if amount is None:
        return f"{value!r} is not a quantity; use {examples}"
    if amount <= 0:
        return f"{value!r} must be greater than zero"
    return None


def env_problem(name: str) -> str | None:
    if not _ENV_NAME.match(name):
        return f"{name!r} is not a valid variable name (letters, digits and '_', not starting with a digit)"
    if name.startswith(RESERVED_ENV_PREFIXES) or name in RESERVED_ENV_NAMES:
        return f"{name!r} is set by PaddleCloud and cannot be overridden"
    return None


def parse_env(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """['A=1', 'B=x=y'] -> {'A': '1', 'B': 'x=y'}; a pair without '=' is refused."""
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise UsageProblem(f"-env: {pair!r} must be NAME=VALUE")
        problem = env_problem(name)
        if problem:
            raise UsageProblem(f"-env: {problem}")
        env[name] = value
    return env


def check(spec: dict[str, Any], flags: dict[str, str] | None = None) -> dict[str, Any]:
    """Raise UsageProblem naming the flag (or SDK parameter) of the first rule broken; return the spec."""
    names = {**FLAGS, **(flags or {})}

    def fail(field: str, message: str) -> UsageProblem:
        return UsageProblem(f"{names.get(field, field)}: {message}")

    problem = job_name_problem(str(spec.get("jobname") or ""))
    if problem:
        raise fail("jobname", problem)
    entry = spec.get("entry")
    if not isinstance(entry, str) or not entry.strip():
        raise fail("entry", "must not be empty: the command that starts a trainer, e.g. \"python train.py\"")
    if "\x00" in entry:
        raise fail("entry", "must not contain NUL bytes")
    for field, (low, high) in LIMITS.items():
        value = spec.get(field)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(field, f"{value!r} is not a whole number")
        if not low <= value <= high:
            raise fail(field, f"must be between {low} and {high} (got {value})")
    for field, examples in (("cpu", CPU_EXAMPLES), ("memory", MEMORY_EXAMPLES), ("pscpu", CPU_EXAMPLES),
                            ("psmemory", MEMORY_EXAMPLES)):
        if spec.get(field) is not None:
            problem = quantity_problem(spec[field], field, examples)
            if problem:
                raise fail(field, problem)
    for name in spec.get("env") or {}:
        problem = env_problem(name)
        if problem:
            raise fail("env", problem)
    registry = spec.get("registry") or ""
    if len(registry) > 63:
        raise fail("registry", "must be at most 63 characters")
    image = spec.get("image") or ""
    if len(image) > 300:
        raise fail("image", "must be at most 300 characters")
    return spec


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
