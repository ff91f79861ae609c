"""paddlectl's root: the `cli` group, its aliases and help sections, one-line errors and shared helpers.

Commands live in cmd_jobs, cmd_files, cmd_build, cmd_account and cmd_config (cmd_help for help and completion)
and attach to the groups here; `commands` imports them all. Every failure is a `PaddleCloudError`
(or a click usage error) that `PaddlectlGroup.main` prints as one line: exit 1 when an operation
failed, 2 for a usage or config error.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click
from click.shell_completion import CompletionItem

from paddlecloud.contract import quantity
from paddlecloud.contract.version import __version__
from paddlecloud.sdk import config as configfile
from paddlecloud.sdk.errors import EXIT_FAILED, EXIT_USAGE, PaddleCloudError, UsageProblem
from paddlecloud.sdk.session import Session

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
OUTPUT = click.Choice(["table", "json", "yaml"])


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def warn(message: str) -> None:
    click.echo(f"warning: {_one_line(message)}", err=True)


def note(message: str) -> None:
    click.echo(message, err=True)


SECTIONS = (
    ("Jobs", ("submit", "get", "describe", "logs", "metrics", "kill", "wait", "delete", "registry")),
    ("Files on the PFS", ("file", "cp", "ls", "mkdir", "rm")),
    ("Images", ("build",)),
    ("Account and configuration", ("login", "logout", "usage", "config")),
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
               "dc": "datacenters", "quotas": "quota", "priority": "priorities"}


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
    except (click.exceptions.Exit, click.Abort, click.ClickException) as exc:
        return _click_failure(exc, argv)
    except KeyboardInterrupt:
        click.echo("error: interrupted", err=True)
        return 130
    except BrokenPipeError:
        # `paddlectl logs job | head`: the reader left; say nothing.
        with contextlib.suppress(OSError):
            sys.stdout = Path(os.devnull).open("w")  # noqa: SIM115 - replaces stdout for the rest of the process
        return 0
    except Exception as exc:
        if debug:
            traceback.print_exc()
        return _failure(exc)


def _click_failure(exc: click.exceptions.Exit | click.Abort | click.ClickException, argv: list[str]) -> int:
    """The exit code for what click raised (usage errors get the usage line)."""
    if isinstance(exc, click.exceptions.Exit):
        return int(exc.exit_code)
    if isinstance(exc, click.Abort):
        click.echo("error: aborted", err=True)
        return EXIT_FAILED
    if isinstance(exc, click.UsageError):
        if exc.__class__.__name__ == "NoArgsIsHelpError" and exc.ctx is not None:
            # `paddlectl` or `paddlectl get` alone: the help, as the original printed it.
            click.echo(exc.ctx.get_help())
            return 0
        if isinstance(exc, click.NoSuchOption):
            return _usage(exc, _unknown_option(exc, argv))
        return _usage(exc, _one_line(exc.format_message()))
    click.echo(f"error: {_one_line(exc.format_message())}", err=True)
    return exc.exit_code


def _failure(exc: Exception) -> int:
    """One line on stderr for a failure of ours, of the system, or of paddlectl itself (a bug)."""
    if isinstance(exc, PaddleCloudError):
        click.echo(f"error: {_one_line(str(exc))}", err=True)
        return exc.exit_code
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        click.echo(f"error: {exc.strerror or exc}{where}", err=True)
        return EXIT_FAILED
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


def password_from(
    password: str | None, password_stdin: bool, flag: str, prompt: str, required: bool = False
) -> str | None:
    """The password of `flag`, of --password-stdin, or asked on the terminal (when there is one)."""
    if password_stdin and password is not None:
        raise UsageProblem(f"give {flag} or --password-stdin, not both")
    if password_stdin:
        return read_stdin_secret("password")
    if password is None:
        ask = password_prompt()
        if ask is not None:
            return ask(prompt)
        if required:
            raise UsageProblem(f"{flag} or --password-stdin is required without a terminal")
    return password


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


@cli.group(cls=GetGroup, short_help="Print resources: jobs, workers, experiments, queue, registry, quota, datacenters.")
def get() -> None:
    """Print resources: jobs, workers JOB, experiments, experiment NAME, queue, priorities, registry, quota,
    datacenters (-o json|yaml for scripts)."""


@cli.group(cls=AliasGroup, short_help="Delete the specified resource: registry NAME, job NAME.")
def delete() -> None:
    """Delete a registry secret, or a job (killed first, then removed from the history)."""


def parse_chunk_size(text: str | None) -> int | None:
    if not text:
        return None
    problem = UsageProblem(f"--chunk-size: {quantity.quote(text)} must be a multiple of 64Ki (65536 bytes), e.g. 8Mi")
    try:
        amount = quantity.parse(text, quantity.MEMORY)
    except quantity.QuantityError:
        raise problem from None
    if amount != int(amount) or amount <= 0 or int(amount) % 65536:
        raise problem
    return int(amount)
