"""paddlectl's commands: the original paddlectl's, with its single-dash flags (`-jobname`) and `--jobname`.

Each command is a thin layer: it reads flags, calls `jobs`, `files` or the session, and prints.
Every failure is a `PaddleCloudError` (or a click usage error) that `PaddlectlGroup.main` prints as
one line: exit 1 when an operation failed, 2 for a usage or config error.
"""

from __future__ import annotations

import difflib
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import click

from paddlecloud import __version__
from paddlecloud.ctl import config as configfile
from paddlecloud.ctl.errors import (
    EXIT_FAILED,
    EXIT_USAGE,
    APIError,
    ConfigError,
    PaddleCloudError,
    UsageProblem,
    describe_end,
)

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
OUTPUT = click.Choice(["table", "json", "yaml"])


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def warn(message: str) -> None:
    click.echo(f"warning: {_one_line(message)}", err=True)


def note(message: str) -> None:
    click.echo(message, err=True)


# --- the root group: aliases, sections in help, one-line errors -------------------------------

SECTIONS = (
    ("Jobs", ("submit", "get", "logs", "metrics", "kill", "wait", "delete", "registry")),
    ("Files on the PFS", ("file", "cp", "ls", "mkdir", "rm")),
    ("Account and configuration", ("login", "logout", "config")),
    ("Other", ("version", "commands", "help", "completion")),
)


class AliasGroup(click.Group):
    """A group whose commands also answer to other names (`get job` = `get jobs`)."""

    aliases: dict[str, str] = {}

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, self.aliases.get(cmd_name, cmd_name))

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        return (command.name if command else name), command, rest


class GetGroup(AliasGroup):
    aliases = {"job": "jobs", "worker": "workers", "registries": "registry", "datacenter": "datacenters",
               "dc": "datacenters", "quotas": "quota"}


class PaddlectlGroup(AliasGroup):
    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        listed: set[str] = set()
        for title, names in SECTIONS:
            rows = []
            for name in names:
                command = self.get_command(ctx, name)
                if command is not None and not command.hidden:
                    rows.append((name, command.get_short_help_str(limit=70)))
                    listed.add(name)
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
        rest = [(n, c.get_short_help_str(70)) for n, c in self.commands.items() if n not in listed and not c.hidden]
        if rest:
            with formatter.section("More"):
                formatter.write_dl(rest)

    def main(  # type: ignore[override]
        self,
        args: list[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> int:
        argv = list(sys.argv[1:] if args is None else args)
        code = run_guarded(lambda: super(PaddlectlGroup, self).main(
            args=argv, prog_name="paddlectl", complete_var=complete_var, standalone_mode=False, **extra
        ), argv)
        if standalone_mode:
            sys.exit(code)
        return code


def _unknown_option(exc: click.NoSuchOption, argv: list[str]) -> str:
    """click reports '-job' as '-j' (it tries short options last): name the token the user typed."""
    token = exc.option_name
    for arg in argv:
        if arg.startswith(exc.option_name) and not arg.startswith("--") and len(arg) > len(exc.option_name):
            token = arg.split("=", 1)[0]
            break
    known: list[str] = []
    if exc.ctx is not None:
        for param in exc.ctx.command.params:
            known.extend(getattr(param, "opts", []))
    longer = sorted(k for k in known if k.startswith(token) and k.startswith("-") and not k.startswith("--"))
    close = longer or difflib.get_close_matches(token, [k for k in known if len(k) > 2], n=1, cutoff=0.7)
    return f"no such option: {token}" + (f"; did you mean {close[0]}?" if close else "")


def _usage(exc: click.UsageError, message: str) -> int:
    where = exc.ctx.command_path if exc.ctx else "paddlectl"
    click.echo(f"error: {where}: {message} (see '{where} --help')", err=True)
    return EXIT_USAGE


def run_guarded(call: Callable[[], Any], argv: list[str]) -> int:
    """Run the CLI; turn every expected failure into one line on stderr and an exit code."""
    debug = os.environ.get("PADDLECTL_DEBUG", "") not in ("", "0")
    try:
        result = call()
        return result if isinstance(result, int) else 0
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.UsageError as exc:
        if exc.__class__.__name__ == "NoArgsIsHelpError" and exc.ctx is not None:
            # `paddlectl` or `paddlectl get` alone: the help, as the original printed it.
            click.echo(exc.ctx.get_help())
            return 0
        if isinstance(exc, click.NoSuchOption):
            return _usage(exc, _unknown_option(exc, argv))
        return _usage(exc, _one_line(exc.format_message()))
    except click.Abort:
        click.echo("error: aborted", err=True)
        return EXIT_FAILED
    except click.ClickException as exc:
        click.echo(f"error: {_one_line(exc.format_message())}", err=True)
        return exc.exit_code
    except PaddleCloudError as exc:
        if debug:
            traceback.print_exc()
        click.echo(f"error: {_one_line(str(exc))}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("error: interrupted", err=True)
        return 130
    except BrokenPipeError:
        # `paddlectl logs job | head`: the reader left; say nothing.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except OSError as exc:
        if debug:
            traceback.print_exc()
        where = f": {exc.filename}" if exc.filename else ""
        click.echo(f"error: {exc.strerror or exc}{where}", err=True)
        return EXIT_FAILED
    except Exception as exc:
        if debug:
            traceback.print_exc()
        click.echo(
            f"error: internal error ({exc.__class__.__name__}: {_one_line(str(exc))}); "
            "run with PADDLECTL_DEBUG=1 for the traceback and please report it",
            err=True,
        )
        return EXIT_FAILED


class State:
    """Per-invocation: where the config is, and the session once a command needs one."""

    def __init__(self, config_file: Path | None) -> None:
        self.config_file = config_file
        self._session: Any = None

    @property
    def config_path(self) -> Path:
        return self.config_file or configfile.config_path()

    def session(self) -> Any:
        if self._session is None:
            from paddlecloud.ctl.api import Session

            self._session = Session.from_config(self.config_path, password_prompt=password_prompt(), warn=warn)
        return self._session


def password_prompt() -> Callable[[str], str] | None:
    """Ask on the terminal without echo; None when there is no terminal (scripts never hang)."""
    if not sys.stdin.isatty():
        return None

    def ask(text: str) -> str:
        value: str = click.prompt(text, hide_input=True, err=True)
        return value

    return ask


def read_stdin_secret(what: str) -> str:
    data = sys.stdin.readline()
    secret = data.rstrip("\r\n")
    if not secret:
        raise UsageProblem(f"--password-stdin: no {what} on standard input")
    return secret


def state(ctx: click.Context) -> State:
    obj = ctx.find_object(State)
    if obj is None:  # a command invoked on its own (tests, completion)
        obj = State(None)
        ctx.obj = obj
    return obj


def session_of(ctx: click.Context) -> Any:
    return state(ctx).session()


def fail(message: str) -> NoReturn:
    raise PaddleCloudError(message)


def complete_jobs(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of job names (quietly nothing when the portal cannot be asked)."""
    try:
        from click.shell_completion import CompletionItem

        from paddlecloud.ctl.api import Session

        session = Session.from_config(password_prompt=None)
        session.timeout = 3
        session.retries = 0
        names = sorted({j["name"] for j in session.paginate("/jobs", {"active": "1"})})
        return [CompletionItem(n) for n in names if n.startswith(incomplete)]
    except Exception:
        return []


@click.group(cls=PaddlectlGroup, context_settings=CONTEXT)
@click.option(
    "--config", "-config", "config_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="Config file (default: $PADDLE_CONFIG or ~/.paddle/config).",
)
@click.version_option(__version__, "--version", prog_name="paddlectl", message="%(prog)s %(version)s")
@click.pass_context
def cli(ctx: click.Context, config_file: Path | None) -> None:
    """paddlectl: submit and watch PaddlePaddle training jobs, and manage your files on PaddleCloud.

    Flags are written as the original paddlectl wrote them (-jobname) or with two dashes (--jobname).
    Exit codes: 0 success, 1 the operation failed (the portal refused it, the job failed, the network
    is down), 2 a usage or configuration error.
    """
    ctx.obj = State(config_file)


# --- submit -----------------------------------------------------------------------------------


def _default_jobname(package: str) -> str:
    import re

    base = Path(package.rstrip("/")).name.lower()
    name = re.sub(r"[^a-z0-9-]+", "-", base).strip("-")
    name = re.sub(r"^[^a-z]+", "", name)[:40].rstrip("-")
    return name or "paddle-cluster-job"


@cli.command(short_help="Submit a job to PaddlePaddle Cloud.")
@click.option("-jobname", "--jobname", help="The job's name: a-z, 0-9 and '-', at most 40 (default: the package's).")
@click.option("-cpu", "--cpu", default="1", show_default=True, help="CPU for each trainer: 2, 0.5 or 500m.")
@click.option("-gpu", "--gpu", type=int, default=0, show_default=True, help="GPUs for each trainer.")
@click.option("-memory", "--memory", default="1Gi", show_default=True, help="Memory for each trainer: 1Gi, 512Mi.")
@click.option("-parallelism", "--parallelism", type=int, default=1, show_default=True, help="Number of trainers.")
@click.option("-pservers", "--pservers", type=int, default=0, show_default=True,
              help="Number of parameter servers (0: collective mode).")
@click.option("-pscpu", "--pscpu", default="1", show_default=True, help="CPU for each parameter server.")
@click.option("-psmemory", "--psmemory", default="1Gi", show_default=True, help="Memory for each parameter server.")
@click.option("-entry", "--entry", required=True, help='Command that starts a trainer, e.g. "python train.py".')
@click.option("-passes", "--passes", type=int, default=1, show_default=True, help="Passes over the data.")
@click.option("-image", "--image", default="", help="Runtime image (default: the datacenter's).")
@click.option("-registry", "--registry", default="", help="Registry secret for a private image (see `registry`).")
@click.option("-datacenter", "--datacenter", default=None, help="Datacenter (default: the config's current one).")
@click.option("-env", "--env", multiple=True, metavar="NAME=VALUE", help="Environment variable; repeat for more.")
@click.option("-max-retries", "--max-retries", "max_retries", type=int, default=0, show_default=True,
              help="Restarts of a failed trainer before the job fails.")
@click.option("-pending-timeout", "--pending-timeout", "pending_timeout", type=int, default=None,
              help="Seconds the job may wait for resources before it fails.")
@click.option("-topology", "--topology", hidden=True, help="PaddlePaddle v1 config (retired; ignored).")
@click.option("-chunk-size", "--chunk-size", "chunk_size", default=None, metavar="SIZE",
              help="Upload chunk size, a multiple of 64Ki (default: the portal's).")
@click.option("-wait", "--wait", "wait_end", is_flag=True, help="Wait until the job ends; exit 1 unless it succeeded.")
@click.option("-f", "--follow", is_flag=True, help="Follow the logs until the job ends; exit 1 unless it succeeded.")
@click.option("-dry-run", "--dry-run", "dry_run", is_flag=True,
              help="Only ask the portal whether it would accept the job (quota included); upload and create nothing.")
@click.option("-o", "--output", type=OUTPUT, default="table", help="Print the submitted job as json or yaml.")
@click.argument("package")
@click.pass_context
def submit(ctx: click.Context, package: str, **flags: Any) -> None:
    """Submit a job. PACKAGE is a local directory, uploaded (resumably) to the job's folder
    /pfs/<datacenter>/home/<user>/jobs/<jobname>/ first, or a /pfs/ directory already there.

    \b
    paddlectl submit -jobname fit -pservers 2 -parallelism 2 -cpu 1 -memory 1Gi \\
        -entry "python train.py" ./fit_a_line
    """
    from paddlecloud.ctl import jobs, spec
    from paddlecloud.ctl.files import is_remote
    from paddlecloud.ctl.output import BarProgress, dump, human_bytes

    if flags["topology"]:
        warn("-topology is a PaddlePaddle v1 option and is ignored; use -entry")
    jobname = flags["jobname"] or _default_jobname(package)
    body = {
        "jobname": jobname,
        "entry": flags["entry"],
        "parallelism": flags["parallelism"],
        "pservers": flags["pservers"],
        "cpu": flags["cpu"],
        "memory": flags["memory"],
        "gpu": flags["gpu"],
        "pscpu": flags["pscpu"],
        "psmemory": flags["psmemory"],
        "passes": flags["passes"],
        "image": flags["image"],
        "registry": flags["registry"],
        "env": spec.parse_env(flags["env"]),
        "max_retries": flags["max_retries"],
        "pending_timeout": flags["pending_timeout"],
        "datacenter": flags["datacenter"],
    }
    spec.check(body)  # before the config is even read
    chunk = parse_chunk_size(flags["chunk_size"])
    if not is_remote(package) and not Path(package).expanduser().is_dir():
        what = "is not a directory" if Path(package).expanduser().exists() else "does not exist"
        raise UsageProblem(f"PACKAGE: {package} {what} (give a local directory or a /pfs/ path)")
    session = session_of(ctx)
    job, summary = jobs.submit(session, body, package, BarProgress(), chunk, dry_run=flags["dry_run"])
    if flags["dry_run"]:
        if flags["output"] in ("json", "yaml"):
            click.echo(dump(job, flags["output"]))
        else:
            asked = job.get("requested") or {}
            click.echo(f"the portal would accept job {jobname} on {job['job']['datacenter']} "
                       f"({asked.get('cpu', 0):g} cores, {human_bytes(int(asked.get('memory', 0)))}B memory, "
                       f"{asked.get('gpu', 0)} GPUs in all); nothing was uploaded or created")
        return
    if summary is not None:
        plural = "s" if summary.files != 1 else ""
        note(f"uploaded {summary.files} file{plural} ({human_bytes(summary.bytes)}B) to {job['spec'].get('package')}"
             + (f", {summary.chunks_reused} chunks already there" if summary.chunks_reused else ""))
    if flags["output"] in ("json", "yaml"):
        click.echo(dump(job, flags["output"]))
    else:
        click.echo(f"job {job['name']} submitted to {job['datacenter']} (uid {job['uid']}, {job['state']})")
    if flags["follow"]:
        follow_logs(ctx, job["uid"], None, None, True, None)
    elif flags["wait_end"]:
        wait_job(ctx, job["uid"])
    elif flags["output"] == "table":
        note(f"follow it with: paddlectl logs -f {job['name']}")


def parse_chunk_size(text: str | None) -> int | None:
    if not text:
        return None
    from paddlecloud.contract import quantity

    problem = UsageProblem(f"--chunk-size: {quantity.quote(text)} must be a multiple of 64Ki (65536 bytes), e.g. 8Mi")
    try:
        amount = quantity.parse(text, quantity.MEMORY)
    except quantity.QuantityError:
        raise problem from None
    if amount != int(amount) or amount <= 0 or int(amount) % 65536:
        raise problem
    return int(amount)


# --- get --------------------------------------------------------------------------------------


@cli.group(cls=GetGroup, short_help="Print resources: jobs, workers, registry, quota, datacenters.")
def get() -> None:
    """Print resources: jobs, workers JOB, registry, quota, datacenters (-o json|yaml for scripts)."""


def _ready(counts: dict[str, Any], with_succeeded: bool) -> str:
    ready = int(counts.get("running", 0)) + (int(counts.get("succeeded", 0)) if with_succeeded else 0)
    return f"{ready}/{int(counts.get('total', 0))}"


def jobs_table(items: list[dict[str, Any]]) -> str:
    from paddlecloud.ctl.output import age, table

    rows = [
        (j["name"], j["state"], _ready(j.get("trainers") or {}, True), _ready(j.get("pservers") or {}, False),
         age(j.get("created_at")), j.get("reason") or "")
        for j in items
    ]
    return table(("NAME", "STATE", "TRAINERS", "PSERVERS", "AGE", "REASON"), rows, empty="No jobs.")


@get.command("jobs", short_help="List your jobs (newest first).")
@click.option("-active", "--active", is_flag=True, help="Only jobs still queued, pending or running.")
@click.option("-state", "--state", type=click.Choice(["queued", "submitting", "pending", "running", "succeeded",
                                                       "failed", "killed"]), help="Only jobs in this state.")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.pass_context
def get_jobs(ctx: click.Context, active: bool, state: str | None, output: str) -> None:
    """NAME, STATE, TRAINERS and PSERVERS (ready/total), AGE, REASON.

    TRAINERS counts running and finished trainers; PSERVERS running ones."""
    from paddlecloud.ctl.output import emit

    params: dict[str, Any] = {}
    if active:
        params["active"] = "1"
    if state:
        params["state"] = state
    items = list(session_of(ctx).paginate("/jobs", params))
    emit(items, output, lambda: jobs_table(items))


def workers_table(items: list[dict[str, Any]]) -> str:
    from paddlecloud.ctl.output import age, table

    rows = [
        (w["name"], w["role"], w["state"], age(w.get("started_at")), w.get("restarts", 0),
         "" if w.get("exit_code") is None else w["exit_code"], w.get("message") or "")
        for w in items
    ]
    return table(("NAME", "ROLE", "STATE", "START", "RESTARTS", "EXIT CODE", "MESSAGE"), rows,
                 empty="No workers yet.")


@get.command("workers", short_help="List the workers (trainers and pservers) of a job.")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.argument("job", shell_complete=complete_jobs)
@click.pass_context
def get_workers(ctx: click.Context, job: str, output: str) -> None:
    """NAME, ROLE, STATE, START (how long ago), RESTARTS, EXIT CODE, MESSAGE."""
    from paddlecloud.ctl.jobs import job_path
    from paddlecloud.ctl.output import emit

    items = list(session_of(ctx).paginate(f"{job_path(job)}/workers"))
    emit(items, output, lambda: workers_table(items))


def registry_table(items: list[dict[str, Any]]) -> str:
    from paddlecloud.ctl.output import age, table

    rows = [(r["name"], r.get("server", ""), r.get("username", ""), age(r.get("created_at"))) for r in items]
    return table(("NAME", "SERVER", "USERNAME", "AGE"), rows, empty="No registry secrets.")


@get.command("registry", short_help="List your registry secrets.")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.pass_context
def get_registry(ctx: click.Context, output: str) -> None:
    """NAME, SERVER, USERNAME, AGE (passwords are write-only and never shown)."""
    from paddlecloud.ctl.output import emit

    items = list(session_of(ctx).paginate("/registry"))
    emit(items, output, lambda: registry_table(items))


QUOTA_ROWS = (
    ("cpu", "cpu", "number"),
    ("memory", "memory", "bytes"),
    ("gpu", "gpu", "number"),
    ("jobs", "active jobs", "number"),
    ("storage", "storage", "bytes"),
    ("storage_files", "storage files", "number"),
)


def quota_table(items: list[dict[str, Any]]) -> str:
    from paddlecloud.ctl.output import human_bytes, number, table

    rows = []
    for report in items:
        limits, usage = report.get("limits", {}), report.get("usage", {})
        for key, label, kind in QUOTA_ROWS:
            limit, used = float(limits.get(key, 0)), float(usage.get(key, 0))
            show = human_bytes if kind == "bytes" else number
            rows.append((report["datacenter"], label, show(used), show(limit), show(max(limit - used, 0))))
    return table(("DATACENTER", "RESOURCE", "USED", "LIMIT", "FREE"), rows, empty="No datacenters.")


@get.command("quota", short_help="Show your limits and usage: compute and storage.")
@click.option("-datacenter", "--datacenter", default=None, help="Only this datacenter.")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.pass_context
def get_quota(ctx: click.Context, datacenter: str | None, output: str) -> None:
    """Per datacenter: cpu (cores), memory, gpu, active jobs, storage (bytes) and files: USED, LIMIT, FREE."""
    from paddlecloud.ctl.output import emit

    params = {"datacenter": datacenter} if datacenter else None
    items = session_of(ctx).get("/quota", params)["results"]
    emit(items, output, lambda: quota_table(items))


def datacenters_table(items: list[dict[str, Any]], current: str) -> str:
    from paddlecloud.ctl.output import table

    rows = [("*" if d["name"] == current else "", d["name"], d.get("engine", ""), d.get("storage_kind", ""),
             d.get("description", "")) for d in items]
    return table(("CURRENT", "NAME", "ENGINE", "STORAGE", "DESCRIPTION"), rows, empty="No datacenters.")


@get.command("datacenters", short_help="List the datacenters you may use.")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.pass_context
def get_datacenters(ctx: click.Context, output: str) -> None:
    """CURRENT (the config's), NAME, ENGINE, STORAGE, DESCRIPTION."""
    from paddlecloud.ctl.output import emit

    session = session_of(ctx)
    items = list(session.paginate("/datacenters"))
    emit(items, output, lambda: datacenters_table(items, session.portal_datacenter))


# --- logs, wait, kill -------------------------------------------------------------------------


def follow_logs(
    ctx: click.Context, job: str, worker: str | None, tail: int | None, follow: bool, prefix: bool | None
) -> None:
    from paddlecloud.ctl.jobs import LogStream

    session = session_of(ctx)
    stream = LogStream(session, job, worker=worker, tail=tail, follow=follow, notify=note)
    iterator: Iterator[tuple[str, str]] = iter(stream)
    for line in _with_prefix_choice(iterator, stream, prefix):
        click.echo(line, nl=False)
        sys.stdout.flush()
    if follow:
        end = stream.job
        message = describe_end(end)
        if end.get("state") != "succeeded":
            raise PaddleCloudError(message)
        note(message)


def _with_prefix_choice(iterator: Iterator[tuple[str, str]], stream: Any, prefix: bool | None) -> Iterator[str]:
    from paddlecloud.ctl.jobs import lines

    first = next(iterator, None)
    # The workers are known once the stream has looked the job up (before its first piece).
    use = prefix if prefix is not None else len(stream.workers) > 1
    if first is None:
        return
    yield from lines(_chain(first, iterator), use)


def _chain(first: tuple[str, str], rest: Iterator[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    yield first
    yield from rest


@cli.command(short_help="Print logs of the job (-f to follow it to the end).")
@click.option("-n", "--tail", type=click.IntRange(min=0), default=None, help="Only the last N lines of each log.")
@click.option("-w", "--worker", default=None, help="One worker: trainer-0, pserver-1, ... (default: all of them).")
@click.option("-f", "--follow", is_flag=True,
              help="Follow until the job ends; then exit 0 if it succeeded, 1 if it failed or was killed.")
@click.option("--prefix/--no-prefix", default=None, help="Start each line with [worker] (default: with several).")
@click.argument("job", shell_complete=complete_jobs)
@click.pass_context
def logs(ctx: click.Context, job: str, tail: int | None, worker: str | None, follow: bool,
         prefix: bool | None) -> None:
    """Print the logs of every worker of JOB (trainers, then pservers), or of one with -w."""
    if worker and worker.startswith(f"{job}-"):
        worker = worker[len(job) + 1:]  # the original's pod-style names: <job>-trainer-0
    follow_logs(ctx, job, worker, tail, follow, prefix)


def wait_job(ctx: click.Context, job: str, timeout: float | None = None) -> None:
    from paddlecloud.ctl.jobs import wait

    def show(current: dict[str, Any]) -> None:
        if current["state"] not in ("succeeded", "failed", "killed"):  # the end is told below
            note(f"job {current['name']}: {current['state']}")

    end = wait(session_of(ctx), job, timeout=timeout, notify=note, on_state=show)
    if end.get("state") != "succeeded":
        raise PaddleCloudError(describe_end(end))
    note(describe_end(end))


@cli.command("wait", short_help="Wait until a job ends; exit 0 if it succeeded, 1 if not.")
@click.option("--timeout", type=float, default=None, help="Give up (exit 1) after this many seconds.")
@click.argument("job", shell_complete=complete_jobs)
@click.pass_context
def wait_command(ctx: click.Context, job: str, timeout: float | None) -> None:
    """Wait until JOB succeeds, fails or is killed, printing its state changes."""
    wait_job(ctx, job, timeout)


def kill_job(ctx: click.Context, job: str, remove: bool) -> None:
    from paddlecloud.ctl.jobs import job_path

    session = session_of(ctx)
    if remove:
        session.delete(job_path(job), {"rm": "1"})
        click.echo(f"job {job} removed")
        return
    answer = session.delete(job_path(job))
    if answer.get("state") == "killed":
        click.echo(f"job {answer['name']} killed")
    else:
        click.echo(f"job {answer['name']} had already {answer.get('state')}; nothing to kill")


@cli.command(short_help="Stop the job. -rm will remove the job from history.")
@click.option("-rm", "--rm", "remove", is_flag=True, help="Also remove the job from the history.")
@click.argument("job", shell_complete=complete_jobs)
@click.pass_context
def kill(ctx: click.Context, job: str, remove: bool) -> None:
    """Stop every worker of JOB; with -rm also forget the job (its files stay on the PFS)."""
    kill_job(ctx, job, remove)


@cli.group(cls=AliasGroup, short_help="Delete the specified resource: registry NAME, job NAME.")
def delete() -> None:
    """Delete a registry secret, or a job (killed first, then removed from the history)."""


@delete.command("registry", short_help="Delete a registry secret.")
@click.argument("name")
@click.pass_context
def delete_registry(ctx: click.Context, name: str) -> None:
    from urllib.parse import quote

    session_of(ctx).delete(f"/registry/{quote(name, safe='')}")
    click.echo(f"registry secret {name} deleted")


@delete.command("job", short_help="Kill a job and remove it from the history (kill -rm).")
@click.argument("job", shell_complete=complete_jobs)
@click.pass_context
def delete_job(ctx: click.Context, job: str) -> None:
    kill_job(ctx, job, True)


@cli.command(short_help="Add a registry secret on PaddleCloud (for private images).")
@click.option("-name", "--name", required=True, help="Your name for it, used by submit -registry.")
@click.option("-username", "--username", required=True, help="Registry user.")
@click.option("-password", "--password", default=None, help="Registry password (better: --password-stdin).")
@click.option("-password-stdin", "--password-stdin", "password_stdin", is_flag=True,
              help="Read the password from standard input.")
@click.option("-server", "--server", required=True, help="Registry server, e.g. registry.example.com.")
@click.pass_context
def registry(ctx: click.Context, name: str, username: str, password: str | None, password_stdin: bool,
             server: str) -> None:
    """Store registry credentials (the password is write-only) for jobs with private images."""
    if password_stdin and password is not None:
        raise UsageProblem("give -password or --password-stdin, not both")
    if password_stdin:
        password = read_stdin_secret("password")
    if password is None:
        ask = password_prompt()
        if ask is None:
            raise UsageProblem("-password or --password-stdin is required without a terminal")
        password = ask(f"Password for {username} at {server}")
    session_of(ctx).post("/registry", {"name": name, "server": server, "username": username, "password": password})
    click.echo(f"registry secret {name} added for {server}; use it with: paddlectl submit -registry {name} ...")


# --- files ------------------------------------------------------------------------------------


def _files(ctx: click.Context) -> Any:
    from paddlecloud.ctl.files import Files

    return Files(session_of(ctx))


def _remote(ctx: click.Context, path: str) -> str:
    from paddlecloud.ctl.files import check_remote

    return check_remote(path, session_of(ctx))


def _copy(ctx: click.Context, paths: tuple[str, ...], chunk_size: str | None, direction: str | None) -> None:
    from paddlecloud.ctl.files import is_remote
    from paddlecloud.ctl.output import BarProgress, human_bytes

    if len(paths) < 2:
        raise UsageProblem("give SRC and DEST (for example: paddlectl file cp ./data /pfs/<dc>/home/<user>/data)")
    sources, dest = list(paths[:-1]), paths[-1]
    if direction == "put" and not is_remote(dest):
        raise UsageProblem(f"DEST {dest!r} must be a /pfs/ path (file put uploads)")
    if direction == "get" and not all(is_remote(s) for s in sources):
        raise UsageProblem("SRC must be /pfs/ paths (file get downloads)")
    chunk = parse_chunk_size(chunk_size)
    files = _files(ctx)
    summary = files.copy(sources, dest, BarProgress(), chunk)
    for skipped in summary.skipped:
        warn(f"skipped {skipped}")
    verb = "uploaded" if is_remote(dest) else "downloaded"
    reused = f"; {summary.chunks_reused} chunks were already there" if summary.chunks_reused else ""
    click.echo(f"{verb} {summary.files} file{'s' if summary.files != 1 else ''} "
               f"({human_bytes(summary.bytes)}B) to {dest}{reused}")


CP_HELP = """Copy files to (upload) or from (download) the PFS; directories are copied recursively.

\b
SRC (no trailing slash) copies the directory itself: DEST/SRC/...
SRC/ (trailing slash) copies what is inside it:      DEST/...
A file goes to DEST/name when DEST ends with / or is a directory.
An interrupted copy resumes where it stopped when run again.
"""


@click.command("cp", help=CP_HELP, short_help="Upload or download files (resumable).")
@click.option("-r", "--recursive", is_flag=True, hidden=True, help="Accepted; directories are always recursive.")
@click.option("-chunk-size", "--chunk-size", "chunk_size", default=None, metavar="SIZE",
              help="Upload chunk size, a multiple of 64Ki (default: the portal's).")
@click.argument("paths", nargs=-1, metavar="SRC... DEST")
@click.pass_context
def cp(ctx: click.Context, paths: tuple[str, ...], recursive: bool, chunk_size: str | None) -> None:
    _copy(ctx, paths, chunk_size, None)


@click.command("put", short_help="Upload files (file cp with a /pfs/ DEST).")
@click.option("-chunk-size", "--chunk-size", "chunk_size", default=None, metavar="SIZE")
@click.argument("paths", nargs=-1, metavar="SRC... DEST")
@click.pass_context
def put(ctx: click.Context, paths: tuple[str, ...], chunk_size: str | None) -> None:
    """Upload local files or directories to the PFS (the original `file put`)."""
    _copy(ctx, paths, chunk_size, "put")


@click.command("get", short_help="Download files (file cp with /pfs/ SRC).")
@click.argument("paths", nargs=-1, metavar="SRC... DEST")
@click.pass_context
def file_get(ctx: click.Context, paths: tuple[str, ...]) -> None:
    """Download files or directories from the PFS."""
    _copy(ctx, paths, None, "get")


def ls_table(items: list[dict[str, Any]], base: str) -> str:
    from paddlecloud.ctl.output import age, human_bytes, table

    prefix = base.rstrip("/") + "/"
    rows = []
    for item in items:
        name = item["path"][len(prefix):] if item["path"].startswith(prefix) else item["name"]
        if item["kind"] == "dir":
            name += "/"
        size = "-" if item["kind"] == "dir" else human_bytes(int(item.get("size", 0)))
        rows.append((name, item["kind"], size, age(item.get("mtime"))))
    return table(("NAME", "KIND", "SIZE", "MODIFIED"), rows, empty="(empty)")


@click.command("ls", short_help="List files on PaddlePaddle Cloud.")
@click.option("-r", "--recursive", is_flag=True, help="List the whole tree.")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.pass_context
def ls(ctx: click.Context, paths: tuple[str, ...], recursive: bool, output: str) -> None:
    """List PATH (default: your home on the current datacenter): NAME, KIND, SIZE, MODIFIED."""
    from paddlecloud.ctl.output import emit

    files = _files(ctx)
    targets = [_remote(ctx, p) for p in paths] or [files.session.home]
    everything: list[dict[str, Any]] = []
    for index, target in enumerate(targets):
        items = list(files.ls(target, recursive))
        everything.extend(items)
        if output == "table":
            if len(targets) > 1:
                click.echo(("\n" if index else "") + f"{target}:")
            entry_is_file = len(items) == 1 and items[0]["path"].rstrip("/") == target.rstrip("/")
            base = target.rsplit("/", 1)[0] if entry_is_file else target
            click.echo(ls_table(items, base))
    if output != "table":
        emit(everything, output, lambda: "")


@click.command("mkdir", short_help="Make directories on PaddlePaddle Cloud.")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.pass_context
def mkdir(ctx: click.Context, paths: tuple[str, ...]) -> None:
    """Create each PATH and its missing parents (an existing directory is fine)."""
    files = _files(ctx)
    for path in paths:
        entry, created = files.mkdir(_remote(ctx, path), parents=True)
        click.echo(f"{'created' if created else 'exists'} {entry['path']}")


@click.command("rm", short_help="Remove files on PaddlePaddle Cloud.")
@click.option("-r", "--recursive", is_flag=True, help="Remove directories and everything in them.")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.pass_context
def rm(ctx: click.Context, paths: tuple[str, ...], recursive: bool) -> None:
    """Remove each PATH (a directory only with -r)."""
    from paddlecloud.ctl.output import human_bytes

    files = _files(ctx)
    for path in paths:
        target = _remote(ctx, path)
        try:
            removed = files.rm(target, recursive)
        except APIError as exc:
            if exc.code == "is_a_directory" and not recursive:
                raise PaddleCloudError(f"{target.rstrip('/')} is a directory; use rm -r to remove it and "
                                       "everything in it") from None
            raise
        entries = int(removed.get("removed_entries", 0))
        click.echo(f"removed {removed['path']} ({entries} entr{'y' if entries == 1 else 'ies'}, "
                   f"{human_bytes(int(removed.get('removed_bytes', 0)))}B)")


@cli.group(cls=AliasGroup, short_help="Simple file operations: cp, ls, mkdir, rm (and put, get).")
def file() -> None:
    """Files on the PFS: /pfs/<datacenter>/home/<user>/... (yours) and /pfs/<datacenter>/public/..."""


for _command in (cp, ls, mkdir, rm):
    file.add_command(_command)
    cli.add_command(_command)
file.add_command(put)
file.add_command(file_get)


# --- account and configuration ----------------------------------------------------------------


@cli.command(short_help="Log in (asks for the password if the config has none) and cache the token.")
@click.option("--password-stdin", "-password-stdin", "password_stdin", is_flag=True,
              help="Read the password from standard input.")
@click.pass_context
def login(ctx: click.Context, password_stdin: bool) -> None:
    """Log in to the current datacenter's portal; the token is cached (0600) for later commands."""
    from paddlecloud.ctl.api import Session

    st = state(ctx)
    config = configfile.load(st.config_path)
    for message in config.warnings:
        warn(message)
    entry = config.current()
    session = Session(entry, config_path=config.path, password_prompt=password_prompt())
    password = read_stdin_secret("password") if password_stdin else None
    if password is None and entry.password is None and session.password_prompt is None:
        raise ConfigError("no password in the config and no terminal to ask on; use --password-stdin")
    answer = session.login(password)
    until = f" (the token is valid until {answer['expires_at']})" if answer.get("expires_at") else ""
    click.echo(f"logged in to {entry.endpoint} as {answer.get('username', entry.username)}{until}")


@cli.command(short_help="Revoke the cached token and forget it.")
@click.pass_context
def logout(ctx: click.Context) -> None:
    session = session_of(ctx)
    revoked = session.logout()
    click.echo(f"logged out of {session.endpoint}" if revoked else "not logged in")


@cli.group(cls=AliasGroup, short_help="Write, switch and show the config file (~/.paddle/config).")
def config() -> None:
    """The config file: $PADDLE_CONFIG or ~/.paddle/config (see `config init`)."""


@config.command("init", short_help="Add a datacenter to the config file (and make it current).")
@click.option("--endpoint", "-endpoint", required=True, help="The portal's URL, e.g. http://127.0.0.1:8000.")
@click.option("--username", "-username", required=True)
@click.option("--password", "-password", default=None, help="Better: --password-stdin.")
@click.option("--password-stdin", "-password-stdin", "password_stdin", is_flag=True,
              help="Read the password from standard input.")
@click.option("--datacenter", "-datacenter", default=None,
              help="The datacenter's name on the portal (default: the only one you may use).")
@click.option("--name", "-name", default=None, help="Your label for it in the file (default: the datacenter).")
@click.option("--save-password/--no-save-password", default=True, show_default=True,
              help="Keep the password in the file (as the original did) or only the token in the cache.")
@click.pass_context
def config_init(ctx: click.Context, endpoint: str, username: str, password: str | None, password_stdin: bool,
                datacenter: str | None, name: str | None, save_password: bool) -> None:
    """Write (or update) the config file without questions, checking the login when a password is given.

    \b
    echo "$PASSWORD" | paddlectl config init --endpoint http://127.0.0.1:8000 \\
        --username demo --password-stdin --datacenter local
    """
    from paddlecloud.ctl.api import Session

    endpoint = endpoint.strip().rstrip("/")
    problem = configfile.check_endpoint(endpoint)
    if problem:
        raise UsageProblem(f"--endpoint: {problem}")
    if password_stdin and password is not None:
        raise UsageProblem("give --password or --password-stdin, not both")
    if password_stdin:
        password = read_stdin_secret("password")
    if password is None:
        ask = password_prompt()
        if ask is not None:
            password = ask(f"Password for {username} at {endpoint}")
    path = state(ctx).config_path
    probe = configfile.Datacenter(name=name or datacenter or "?", username=username, endpoint=endpoint,
                                  password=password, portal_name=datacenter or "?")
    if password is not None:
        session = Session(probe, config_path=path)
        session.login(password)  # checks the endpoint and the password now, and caches the token
        if datacenter is None:
            usable = [d["name"] for d in session.paginate("/datacenters")]
            if len(usable) != 1:
                raise UsageProblem(f"--datacenter is required: you may use {', '.join(usable) or 'none'}")
            datacenter = usable[0]
    elif datacenter is None:
        raise UsageProblem("--datacenter is required when no password is given")
    entry = configfile.Datacenter(
        name=name or datacenter, username=username, endpoint=endpoint,
        password=password if save_password else None, portal_name=datacenter,
    )
    configfile.save_entry(path, entry)
    saved = "" if save_password or password is None else " (password not saved; the token is cached)"
    click.echo(f"wrote {configfile.shown(path)}: {entry.name} at {endpoint} as {username}, current{saved}")


@config.command("use", short_help="Switch the current datacenter.")
@click.argument("name")
@click.pass_context
def config_use(ctx: click.Context, name: str) -> None:
    path = state(ctx).config_path
    updated = configfile.set_current(path, name)
    entry = updated.current()
    click.echo(f"current datacenter: {entry.name} ({entry.endpoint} as {entry.username})")


@config.command("view", short_help="Show the configured datacenters (passwords hidden).")
@click.pass_context
def config_view(ctx: click.Context) -> None:
    from paddlecloud.ctl.output import table

    config_ = configfile.load(state(ctx).config_path)
    for message in config_.warnings:
        warn(message)
    rows = [("*" if d.name == config_.current_name else "", d.name, d.portal_name, d.endpoint, d.username,
             "yes" if d.password is not None else "no") for d in config_.datacenters]
    click.echo(f"# {configfile.shown(config_.path)}")
    click.echo(table(("CURRENT", "NAME", "DATACENTER", "ENDPOINT", "USERNAME", "PASSWORD"), rows))


# --- other ------------------------------------------------------------------------------------


@cli.command(short_help="Print the client's and the portal's versions.")
@click.option("--client", "-client", "client_only", is_flag=True, help="Only the client's version.")
@click.pass_context
def version(ctx: click.Context, client_only: bool) -> None:
    import platform

    click.echo(f"paddlectl {__version__} (python {platform.python_version()})")
    if client_only:
        return
    from paddlecloud.ctl.api import Session

    try:
        config_ = configfile.load(state(ctx).config_path)
    except ConfigError as exc:
        note(f"portal: unknown ({exc})")
        return
    session = Session(config_.current(), config_path=config_.path)
    info = session.version()
    click.echo(f"portal {info.get('version')} (api {info.get('api')}) at {session.endpoint}")


def _all_commands(group: click.Group, ctx: click.Context, prefix: str = "") -> Iterator[tuple[str, str]]:
    for name in sorted(group.list_commands(ctx)):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        yield f"{prefix}{name}", command.get_short_help_str(limit=70)
        if isinstance(command, click.Group):
            yield from _all_commands(command, ctx, f"{prefix}{name} ")


@cli.command(short_help="List all command names.")
@click.pass_context
def commands(ctx: click.Context) -> None:
    root = ctx.find_root()
    rows = list(_all_commands(cli, root.command.make_context("paddlectl", [], resilient_parsing=True)))
    width = max(len(name) for name, _ in rows)
    for name, text in rows:
        click.echo(f"{name.ljust(width)}   {text}")


@cli.command("help", short_help="Describe commands and their flags: help [COMMAND]...")
@click.argument("words", nargs=-1, metavar="[COMMAND]...")
@click.pass_context
def help_command(ctx: click.Context, words: tuple[str, ...]) -> None:
    command: click.Command = cli
    context = click.Context(cli, info_name="paddlectl")
    for word in words:
        if not isinstance(command, click.Group):
            raise UsageProblem(f"{context.command_path} has no subcommands")
        found = command.get_command(context, word)
        if found is None:
            names = ", ".join(sorted(command.list_commands(context)))
            raise UsageProblem(f"no command {word!r} in {context.command_path}; commands: {names}")
        command = found
        context = click.Context(command, info_name=command.name, parent=context)
    click.echo(command.get_help(context))


@cli.command(short_help="Print the shell completion script: completion bash|zsh|fish.")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the completion script for SHELL. Enable it with, for bash:

    \b
    eval "$(paddlectl completion bash)"        # in ~/.bashrc
    """
    from click.shell_completion import get_completion_class

    completer = get_completion_class(shell)
    assert completer is not None
    click.echo(completer(cli, {}, "paddlectl", "_PADDLECTL_COMPLETE").source())

from paddlecloud.ctl import cmd_metrics  # noqa: E402, F401  (attaches `paddlectl metrics`)
