"""paddlectl's commands about commands: commands, help, completion."""

from __future__ import annotations

from collections.abc import Iterator

import click
from click.shell_completion import get_completion_class

from paddlecloud.ctl.app import cli
from paddlecloud.sdk.errors import UsageProblem


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
    completer = get_completion_class(shell)
    assert completer is not None
    click.echo(completer(cli, {}, "paddlectl", "_PADDLECTL_COMPLETE").source())
