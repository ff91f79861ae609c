"""The job spec's rules, shared by the portal's serializer and paddlectl/the SDK: each returns its message.

Every function answers what is wrong (a message naming the rule) or None, so the portal wraps it in
a 400 naming the field and the client in an error naming the flag or SDK parameter.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from paddlecloud.contract import quantity
from paddlecloud.contract.jobenv import PREFIX as JOB_ENV_PREFIX

MAX_NAME = 40  # so "<name>-<suffix>-pserver-<i>" still fits a 63-character DNS label
MAX_ENTRY = 4096
MAX_IMAGE = 300
MAX_REGISTRY = 63
MAX_PRIORITY = 40  # a priority class's name (GET /api/v1/priorities lists those a user may use)
MAX_PACKAGE = 4096
MAX_ENV_VARS = 256
MAX_ENV_NAME = 256
MAX_ENV_VALUE = 32768

# (minimum, maximum) of the integer fields.
LIMITS = {
    "parallelism": (1, 1000),
    "min_parallelism": (1, 1000),  # an elastic collective job's fewest trainers (parallelism: its most)
    "pservers": (0, 100),
    "gpu": (0, 64),
    "passes": (1, 100000),
    "max_retries": (0, 10),
    "max_restarts": (0, 100),  # whole-job restarts from the latest checkpoint after a failure
    "pending_timeout": (1, 7 * 86400),
    "stall_timeout": (10, 7 * 86400),  # seconds without a trainer's log line before the job is Stalled
}
STALL_ACTIONS = ("warn", "fail")  # a stalled job gets a warning and an event; `fail` also fails it (Stalled)

# The quantity fields and what each measures; each must also be greater than zero.
QUANTITIES = {
    "cpu": quantity.CPU,
    "memory": quantity.MEMORY,
    "pscpu": quantity.CPU,
    "psmemory": quantity.MEMORY,
}
DEFAULTS = {"cpu": "1", "memory": "1Gi", "pscpu": "1", "psmemory": "1Gi"}

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # explicit ranges: ASCII only

# Variables PaddleCloud sets for the launcher and Paddle; a user value would silently break the wiring.
RESERVED_ENV_PREFIXES = (JOB_ENV_PREFIX, "PADDLE_")
RESERVED_ENV_NAMES = frozenset({"POD_IP", "TRAINER_ID", "TRAINERS", "PATH", "VIRTUAL_ENV", "JOB_COMPLETION_INDEX"})
# Names PaddleCloud sets only in parameter-server mode (pservers > 0; launch_env.paddle_env): free in
# collective mode, where nothing sets them and Paddle's collective role maker reads neither.
PS_MODE_ENV_NAMES = frozenset({"FLAGS_enable_pir_api", "TRAINING_ROLE"})

# Paddle's own launchers start every rank themselves: under PaddleCloud, which already starts each
# trainer and pserver with its rank's variables, each would run alone as rank 0 of 1 on all the data.
_PADDLE_LAUNCHER = re.compile(r"(?:\bpaddle\.distributed(?:\.fleet)?\.launch\b|(?:^|[\s;&|/(])fleetrun(?:$|[\s;&|)]))")

# Variables that change how programs *start* rather than what they do: the dynamic loader would load a
# library of the user's choosing into the launcher (and every helper it runs) before any of our code,
# and an interpreter or shell would run a file of theirs first or replace its standard library. A job
# has no need for them: its own code runs anyway, and PYTHONPATH, LANG, OMP_NUM_THREADS, CUDA_*,
# NCCL_*, GLOG_*, FLAGS_* and the rest stay free.
LOADER_ENV_PREFIXES = {
    "LD_": "names starting with 'LD_' change what the dynamic loader loads into every program",
    "DYLD_": "names starting with 'DYLD_' change what the dynamic loader loads into every program",
}
STARTUP_ENV_NAMES = {
    "GCONV_PATH": "it makes the C library load character-set modules from a folder of your choice",
    "GLIBC_TUNABLES": "it changes how the dynamic loader and the C library start",
    "PYTHONHOME": "it replaces the Python standard library the launcher starts with",
    "PYTHONSTARTUP": "it runs a file before the Python interpreter starts your program",
    "PYTHONINSPECT": "it leaves Python at an interactive prompt after your program, so the job never ends",
    "PYTHONEXECUTABLE": "it changes which program Python reports as itself and starts for subprocesses",
    "PYTHONPLATLIBDIR": "it changes where Python looks for its standard library",
    "BASH_ENV": "it makes every non-interactive bash run a file before its command",
    "ENV": "it makes sh run a file before its commands",
    "SHELLOPTS": "it changes the options of every bash started",
    "BASHOPTS": "it changes the options of every bash started",
    "IFS": "it changes how the shell splits the job's command line",
    "PS4": "it makes bash run commands while tracing",
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
        return f"may contain only a-z, 0-9 and '-' (found {', '.join(map(repr, bad[:10]))})"
    if value.endswith("-"):
        return "must end with a letter or digit"
    return None


def entry_problem(value: object) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return 'must not be empty: the command that starts a trainer, e.g. "python train.py"'
    if len(value) > MAX_ENTRY:
        return f"must be at most {MAX_ENTRY} characters"
    if "\x00" in value:
        return "must not contain NUL bytes"
    if _PADDLE_LAUNCHER.search(value):
        return (
            "must not run Paddle's launcher (paddle.distributed.launch, fleetrun): PaddleCloud already starts "
            "each trainer and pserver as its own rank with Paddle's variables set, so under it every process "
            'would train alone as rank 0 of 1; run your script itself, e.g. "python train.py", and set '
            "-parallelism and -pservers"
        )
    return None


def elastic_problem(min_parallelism: int, parallelism: int, pservers: int) -> str | None:
    """What is wrong with an elastic size (min_parallelism to parallelism trainers), or None."""
    if min_parallelism > parallelism:
        return f"must be at most parallelism ({parallelism}): an elastic job runs with min_parallelism to parallelism"
    if pservers and min_parallelism < parallelism:
        return ("an elastic size is for collective jobs (pservers 0): a parameter-server job's trainers and pservers "
                "run as one fixed set")  # fmt: skip
    return None


def integer_problem(field: str, value: object) -> str | None:
    low, high = LIMITS[field]
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{quantity.quote(value)} is not a whole number"
    if not low <= value <= high:
        return f"must be between {low} and {high} (got {value})"
    return None


def quantity_problem(field: str, value: object) -> str | None:
    """A quantity field's problem ("'1GB' is not a quantity; use ..."), zero included, or None."""
    try:
        amount = quantity.parse(value, QUANTITIES[field])
    except quantity.QuantityError as exc:
        return str(exc)
    if amount <= 0:
        return f"{quantity.quote(value)} must be greater than zero"
    return None


def env_name_problem(name: str, pservers: int | None = None) -> str | None:
    """What is wrong with a job's environment variable name, or None.

    `pservers` is the job's count (its mode); None where it is not known yet: the names reserved in
    one mode only (PS_MODE_ENV_NAMES) are then left to the check of the whole spec.
    """
    if len(name) > MAX_ENV_NAME or not _ENV_NAME.fullmatch(name):
        return (
            f"{quantity.quote(name)} is not a valid variable name (letters, digits and '_', not starting "
            f"with a digit, at most {MAX_ENV_NAME} characters)"
        )
    if name.startswith(RESERVED_ENV_PREFIXES) or name in RESERVED_ENV_NAMES:
        return f"{name!r} is set by PaddleCloud and cannot be overridden"
    if name in PS_MODE_ENV_NAMES and pservers:
        return f"{name!r} is set by PaddleCloud in parameter-server mode (pservers > 0) and cannot be overridden"
    for prefix, why in LOADER_ENV_PREFIXES.items():
        if name.startswith(prefix):
            return f"{name!r} is refused: {why}"
    if name in STARTUP_ENV_NAMES:
        return f"{name!r} is refused: {STARTUP_ENV_NAMES[name]}"
    return None


def env_problem(env: object, pservers: int | None = None) -> str | None:
    """What is wrong with a job's env (a mapping of names to string values) in a job of `pservers`
    parameter servers (None: mode not known yet, see env_name_problem), or None."""
    if not isinstance(env, dict):
        return "must be an object of NAME: value"
    if len(env) > MAX_ENV_VARS:
        return f"at most {MAX_ENV_VARS} variables (got {len(env)})"
    for name, value in env.items():
        problem = env_name_problem(str(name), pservers)
        if problem:
            return problem
        if not isinstance(value, str):
            return f"{name!r}: the value must be a string"
        if len(value) > MAX_ENV_VALUE:
            return f"{name!r}: the value must be at most {MAX_ENV_VALUE} characters"
    return None


MAX_PARAMS = 64
MAX_PARAM_TEXT = 1000  # characters of one string value
MAX_PARAMS_BYTES = 32 * 1024  # all of them as JSON: PADDLECLOUD_PARAMS is one environment variable
_PARAM_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
ParamValue = str | int | float | bool


def _param_value_problem(value: object) -> str | None:
    if isinstance(value, bool | int):
        return None if isinstance(value, bool) or abs(value) < 2**63 else "must be an integer within 64 bits"
    if isinstance(value, float):
        return None if math.isfinite(value) else "must be a finite number"
    if isinstance(value, str):
        return None if len(value) <= MAX_PARAM_TEXT else f"must be at most {MAX_PARAM_TEXT} characters"
    return "must be a string, a number, true or false"


def params_problem(params: object) -> tuple[str, str] | None:
    """What is wrong with a job's params (name -> string, number or bool), as (field, problem): the field is
    `params` or `params.<name>`; None where nothing is."""
    if not isinstance(params, dict):
        return "params", "must be an object of name: value"
    if len(params) > MAX_PARAMS:
        return "params", f"at most {MAX_PARAMS} parameters (got {len(params)})"
    try:
        size = len(json.dumps(params, ensure_ascii=False).encode())
    except (TypeError, ValueError):  # a value JSON cannot hold: the loop below names it
        size = 0
    if size > MAX_PARAMS_BYTES:
        return "params", f"at most {MAX_PARAMS_BYTES} bytes as JSON (got {size}): the job reads them from its env"
    for name, value in params.items():
        if not isinstance(name, str) or not _PARAM_NAME.fullmatch(name):
            shown = str(name)[:40]
            return f"params.{shown}", "a name is a-z first, then a-z, 0-9 or _, at most 40 characters"
        problem = _param_value_problem(value)
        if problem:
            return f"params.{name}", problem
    return None


_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")  # ASCII digits only; a longer one is text, never a float that rounds
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?")


def param_text(value: ParamValue) -> str:
    """A param's value as `-param` takes it back to the same value: true/false, the number, or the text (in JSON
    quotes where it would read as another type, "42" or "true", or starts with a quote or a space)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, str):
        return str(value)
    plain = _typed(value) == value and not value.startswith('"') and value == value.strip()  # a form strips lines
    return value if plain else json.dumps(value, ensure_ascii=False)


def _typed(text: str) -> ParamValue:
    if text in ("true", "false"):
        return text == "true"
    if _INTEGER.fullmatch(text):
        return int(text)
    if _DECIMAL.fullmatch(text) and not text.lstrip("+-").isdigit() and math.isfinite(float(text)):
        return float(text)  # a point or an exponent: digits alone past 18 stay text
    return text


def parse_param(pair: str) -> tuple[str, ParamValue]:
    """paddlectl's `-param NAME=VALUE`: true/false, an integer, a number, "text in JSON quotes", else the text as it
    is; ValueError naming the rule."""
    name, found, text = pair.partition("=")
    if not found:
        raise ValueError(f"{pair[:60]!r} must be NAME=VALUE")
    value: ParamValue = _typed(text)
    if len(text) >= 2 and text.startswith('"') and text.endswith('"'):
        try:
            value = json.loads(text)
        except ValueError:
            raise ValueError(f"params.{name[:40]}: a quoted value must be a JSON string") from None
        if not isinstance(value, str):
            raise ValueError(f"params.{name[:40]}: a quoted value must be a JSON string")
    problem = params_problem({name: value})
    if problem:
        raise ValueError(f"{problem[0]}: {problem[1]}")
    return name, value


MAX_WEBHOOK_URL = 2000


def webhook_url_problem(url: object) -> str | None:
    """What is wrong with a webhook URL (http or https, a host, no user:password@), or None.

    Where it may point (no loopback or private address) is the portal's check at send time, when
    the name is resolved: a name can resolve elsewhere later.
    """
    if not isinstance(url, str):
        return "the webhook must be a URL string"
    if len(url) > MAX_WEBHOOK_URL:
        return f"the webhook URL must be at most {MAX_WEBHOOK_URL} characters"
    if not url.isascii() or any(c.isspace() or not c.isprintable() for c in url):
        return "the webhook URL must be ASCII without spaces (percent-encode the rest)"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"the webhook URL is malformed: {exc}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "the webhook must be an http:// or https:// URL with a host"
    if parts.username is not None or parts.password is not None:
        return "the webhook URL must not carry a user or password (put a token in its path or query)"
    if port == 0:
        return "the webhook URL's port must be 1-65535"
    return None


def notify_problem(notify: object) -> str | None:
    """What is wrong with a job's notify ({"email": bool, "webhook": URL or ""}), or None."""
    if notify is None:
        return None
    if not isinstance(notify, dict):
        return 'must be an object like {"email": true, "webhook": "https://..."}'
    unknown = set(notify) - {"email", "webhook"}
    if unknown:
        return f"unknown key {sorted(map(str, unknown))[0][:40]!r}; the keys are email and webhook"
    if not isinstance(notify.get("email", False), bool):
        return "email must be true or false"
    webhook = notify.get("webhook", "")
    return webhook_url_problem(webhook) if webhook else None


def parse_notify(text: str) -> dict[str, Any]:
    """paddlectl's `-notify email,webhook=URL` (or `none`) as the spec's notify object; ValueError naming the rule.

    `webhook=` comes last: everything after it is the URL (which may hold commas).
    """
    notify: dict[str, Any] = {"email": False, "webhook": ""}
    head, found, url = text.partition("webhook=")
    if found:
        notify["webhook"] = url
    for item in filter(None, (part.strip() for part in head.split(","))):
        if item == "email":
            notify["email"] = True
        elif item != "none":
            raise ValueError(f"{item[:40]!r} is not email, webhook=URL or none")
    problem = notify_problem(notify)
    if problem:
        raise ValueError(problem)
    return notify


def worker_requested(spec: dict[str, Any], pserver: bool) -> tuple[Decimal, int, int]:
    """(cores, memory bytes, GPUs) one trainer, or one pserver, of a valid job asks for."""
    cpu_field, memory_field = ("pscpu", "psmemory") if pserver else ("cpu", "memory")
    cpu = quantity.cores(str(spec.get(cpu_field) or DEFAULTS[cpu_field]), cpu_field)
    memory = quantity.byte_count(str(spec.get(memory_field) or DEFAULTS[memory_field]), field=memory_field)
    return cpu, memory, 0 if pserver else int(spec.get("gpu", 0))


def requested(spec: dict[str, Any]) -> tuple[Decimal, int, int]:
    """(cores, memory bytes, GPUs) a whole valid job asks for: trainers and pservers together."""
    trainers, pservers = int(spec.get("parallelism", 1)), int(spec.get("pservers", 0))
    t_cpu, t_memory, t_gpu = worker_requested(spec, pserver=False)
    p_cpu, p_memory, _ = worker_requested(spec, pserver=True)
    return trainers * t_cpu + pservers * p_cpu, trainers * t_memory + pservers * p_memory, trainers * t_gpu
