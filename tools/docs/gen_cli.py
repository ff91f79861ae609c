"""docs/reference/cli.md: every paddlectl command, from the click group itself (client/paddlecloud/ctl).

Walks `paddlecloud.ctl.commands.cli` (the root group with every cmd_* module attached), in the order
`paddlectl --help` shows them (app.SECTIONS, then the rest), each group's commands after it. For each
command: its usage line, its help text, its aliases, and every option as `--help` prints it (click's own
help record: the flags, the value's type, the help with its default and whether it is required).
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
from paddlecloud.ctl.app import SECTIONS, AliasGroup
from paddlecloud.ctl.commands import cli

from tools.docs.common import REFERENCE, banner, cell, main_for

OUTPUT = REFERENCE / "cli.md"
PROG = "paddlectl"
WIDTH = 88  # columns of the usage and help text: what fits the page's code blocks


@dataclass(frozen=True)
class Entry:
    path: tuple[str, ...]  # ("get", "jobs"); () is paddlectl itself
    command: click.Command
    ctx: click.Context
    aliases: tuple[str, ...]

    @property
    def name(self) -> str:
        return " ".join((PROG, *self.path))


def _context(command: click.Command, name: str, parent: click.Context | None) -> click.Context:
    # The command's own settings (help option names), at a fixed width: the page never depends on the terminal.
    settings = {**command.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH}
    return click.Context(command, info_name=name, parent=parent, **settings)


def _ordered(group: click.Group, ctx: click.Context) -> list[str]:
    names = list(group.list_commands(ctx))
    if group is not cli:
        return names
    listed = [name for _, section in SECTIONS for name in section if name in names]
    return listed + [name for name in names if name not in listed]


def _aliases(group: click.Group, name: str) -> tuple[str, ...]:
    table = group.aliases if isinstance(group, AliasGroup) else {}
    return tuple(sorted(alias for alias, target in table.items() if target == name))


def commands(group: click.Group = cli, ctx: click.Context | None = None,
             path: tuple[str, ...] = ()) -> Iterator[Entry]:
    """Every command under `group` (itself first), skipping hidden ones, in the help's order."""
    ctx = ctx or _context(group, PROG, None)
    if not path:
        yield Entry((), group, ctx, ())
    for name in _ordered(group, ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        sub = _context(command, name, ctx)
        yield Entry((*path, name), command, sub, _aliases(group, name))
        if isinstance(command, click.Group):
            yield from commands(command, sub, (*path, name))


def _cell(text: str) -> str:
    return cell(text, escape_html=True)


def _help_text(entry: Entry) -> str:
    """The help as `--help` wraps it (click keeps `\\b` blocks, such as examples, as they are written)."""
    formatter = click.HelpFormatter(width=WIDTH, max_width=WIDTH)
    entry.command.format_help_text(entry.ctx, formatter)
    return textwrap.dedent(formatter.getvalue()).strip("\n")


def _anchor(entry: Entry) -> str:
    return "-".join((PROG, *entry.path)).replace("_", "-")


def _options(entry: Entry) -> list[str]:
    rows = []
    for param in entry.command.get_params(entry.ctx):
        record = param.get_help_record(entry.ctx)
        if record is None:
            continue
        flags, help_text = record
        rows.append(f"| `{flags}` | {_cell(help_text)} |")
    if not rows:
        return []
    return ["| option | meaning |", "| --- | --- |", *rows, ""]


def _subcommands(entry: Entry) -> list[str]:
    if not isinstance(entry.command, click.Group):
        return []
    rows = []
    for name in _ordered(entry.command, entry.ctx):
        command = entry.command.get_command(entry.ctx, name)
        if command is None or command.hidden:
            continue
        target = "-".join((PROG, *entry.path, name))
        rows.append(f"| [`{name}`](#{target}) | {_cell(command.get_short_help_str(limit=200))} |")
    return ["| command | what it does |", "| --- | --- |", *rows, ""]


def section(entry: Entry) -> list[str]:
    """One command's part of the page."""
    level = "#" * min(2 + max(len(entry.path) - 1, 0), 4)
    lines = [f"{level} `{entry.name}` {{ #{_anchor(entry)} }}", ""]
    lines += ["```text", entry.command.get_usage(entry.ctx), "```", ""]
    help_text = _help_text(entry)
    if help_text:
        lines += ["```text", help_text, "```", ""]
    if entry.aliases:
        lines += ["Also answers to: " + ", ".join(f"`{alias}`" for alias in entry.aliases) + ".", ""]
    return lines + _subcommands(entry) + _options(entry)


def render() -> dict[Path, str]:
    lines = [
        banner("tools.docs.gen_cli").rstrip("\n"),
        "",
        "# paddlectl commands",
        "",
        "Every command of `paddlectl` as `paddlectl COMMAND --help` prints it, generated from the click",
        "definitions in `client/paddlecloud/ctl/`. Flags are written as the original paddlectl wrote them",
        "(`-jobname`) or with two dashes (`--jobname`). How the client is installed and configured, its exit",
        "codes and the SDK: [paddlectl and the SDK](client.md).",
        "",
    ]
    for entry in commands():
        lines += section(entry)
    return {OUTPUT: "\n".join(lines).rstrip("\n") + "\n"}


def main(argv: list[str] | None = None) -> int:
    return main_for(render, "Write (or --check) docs/reference/cli.md from paddlectl's click commands.", argv)


if __name__ == "__main__":
    sys.exit(main())
