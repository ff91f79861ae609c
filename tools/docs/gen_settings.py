"""docs/reference/settings.md: every environment variable the code reads, found in the code itself.

Nothing is imported: the sources are parsed (ast, tokenize), so the page does not depend on the environment
of whoever generates it.
- portal/settings.py: every call of core/env.py's readers (`env_str`, `env_bool`, `env_int`, `env_list`,
  `env_secret`), with how it is read, its default and minimum, the comment above or beside it in the code,
  and the section of settings.py it sits in;
- the portal's apps (jobs/, storage/, ...): `os.environ.get(NAME)`, `os.environ[NAME]`, `os.getenv(NAME)`
  with NAME a string or a module constant (read on the workers, where they are used);
- scripts/common.sh: `${NAME:-default}` (what `make run` sets or reads);
- the client (paddlecloud.sdk, paddlecloud.ctl): the same reads, and its `_env_int`/`_env_float` helpers.
What each variable means comes from tools/docs/settings_help.py; a variable without words there fails.
"""

from __future__ import annotations

import ast
import contextlib
import io
import operator
import re
import sys
import tokenize
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.docs import settings_help
from tools.docs.common import REFERENCE, ROOT, banner, cell, main_for
from tools.docs.settings_help import Help

OUTPUT = REFERENCE / "settings.md"
SETTINGS = ROOT / "portal" / "settings.py"
SCRIPTS = ROOT / "scripts" / "common.sh"
# The portal's packages, as the import contracts list them (pyproject.toml: every package but the client's).
PORTAL_APPS = tuple(
    name for name in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
    if name != "paddlecloud"
)
CLIENT_PARTS = ("client/paddlecloud/sdk", "client/paddlecloud/ctl", "client/paddlecloud/cli.py")
# Read by the code but not settings of PaddleCloud's own.
NOT_SETTINGS = {"PATH"}  # the network holder's PATH (jobs/engines/local/network.py), passed on as it is

READERS = {
    "env_str": "text",
    "env_bool": "`true` / `false`",
    "env_int": "integer",
    "env_list": "comma-separated list",
    "env_choice": "one of {choices}",
    "env_secret": "secret, or a file named by `{name}_FILE`",
    "_env_int": "integer",
    "_env_float": "number",
}
SECTION = re.compile(r"^#\s*---\s*(?P<title>.+?)\s*-{3,}\s*$")
SCRIPT_DEFAULT = re.compile(r"\$\{(?P<name>[A-Z][A-Z0-9_]*):-(?P<default>[^}]*)\}")
_OPERATORS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Pow: operator.pow,
    ast.FloorDiv: operator.floordiv, ast.Div: operator.truediv,
}


class Unknown(Exception):
    """A value the generator does not compute (a path, a condition): its words come from settings_help."""


@dataclass
class Read:
    name: str
    reader: str
    where: str
    line: int
    default: Any = None  # the code's default, where it is a plain value
    has_default: bool = False
    minimum: Any = None
    choices: tuple[Any, ...] = ()  # env_choice: the values it accepts
    comment: str = ""
    section: str = ""


@dataclass
class Source:
    path: Path
    tree: ast.Module
    lines: list[str]
    comments: dict[int, str]
    constants: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> Source:
        text = path.read_text(encoding="utf-8")
        comments = {
            token.start[0]: token.string.lstrip("#").strip()
            for token in tokenize.generate_tokens(io.StringIO(text).readline)
            if token.type == tokenize.COMMENT
        }
        source = cls(path, ast.parse(text), text.splitlines(), comments)
        source.constants = _constants(source.tree)
        return source

    @property
    def where(self) -> str:
        return str(self.path.relative_to(ROOT))

    def comment_only(self, line: int) -> bool:
        return 0 < line <= len(self.lines) and self.lines[line - 1].lstrip().startswith("#")


def value(node: ast.AST, constants: dict[str, Any]) -> Any:
    """The value of a constant expression (numbers, strings, arithmetic, module constants), else Unknown."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -value(node.operand, constants)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](value(node.left, constants), value(node.right, constants))
    if isinstance(node, ast.List | ast.Tuple):
        return [value(item, constants) for item in node.elts]
    raise Unknown(ast.unparse(node))


def _constants(tree: ast.Module) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for statement in tree.body:
        if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
            continue
        target = statement.targets[0]
        pairs: list[tuple[ast.expr, ast.expr]] = [(target, statement.value)]
        if isinstance(target, ast.Tuple) and isinstance(statement.value, ast.Tuple):
            pairs = list(zip(target.elts, statement.value.elts, strict=False))
        for name, node in pairs:
            if isinstance(name, ast.Name):
                try:
                    found[name.id] = value(node, found)
                except Unknown:
                    continue
    return found


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}


def _statement(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> ast.stmt:
    while not isinstance(node, ast.stmt):
        node = parents[node]
    return node


def _comment(source: Source, statement: ast.stmt) -> str:
    """The comment block right above the statement (not a section line) and any comment beside it."""
    above: list[str] = []
    line = statement.lineno - 1
    while source.comment_only(line) and not SECTION.match(source.lines[line - 1].strip()):
        above.insert(0, source.comments.get(line, ""))
        line -= 1
    end = statement.end_lineno or statement.lineno
    beside = [
        source.comments[n] for n in range(statement.lineno, end + 1)
        if n in source.comments and not source.comment_only(n)
    ]
    return " ".join(part for part in [*above, *beside] if part and "fmt:" not in part)


def _section(source: Source, line: int) -> str:
    title = ""
    for number, text in enumerate(source.lines[:line], start=1):
        match = SECTION.match(text.strip())
        if match and number < line:
            title = match.group("title")
    return title


def _name_of(call: ast.Call, constants: dict[str, Any]) -> str | None:
    if not call.args:
        return None
    try:
        name = value(call.args[0], constants)
    except Unknown:
        return None
    return name if isinstance(name, str) and re.fullmatch(r"[A-Z][A-Z0-9_]*", name) else None


def _reader(call: ast.Call) -> str | None:
    """How a call reads the environment: a core/env.py or client helper, `os.environ.get`, `os.getenv`."""
    func = call.func
    if isinstance(func, ast.Name) and func.id in READERS:
        return func.id
    dotted = ast.unparse(func)
    return dotted if dotted in ("os.environ.get", "os.getenv") else None


def _default(call: ast.Call, reader: str) -> ast.expr | None:
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    if reader == "env_secret":
        return None
    position = 2 if reader == "env_choice" else 1  # env_choice(name, choices, default)
    return keywords.get("default", call.args[position] if len(call.args) > position else None)


def reads(source: Source) -> Iterator[Read]:
    """Every environment read in one module, in the order of the code."""
    parents = _parents(source.tree)
    found: list[Read] = []
    for node in ast.walk(source.tree):
        if not isinstance(node, ast.Call | ast.Subscript):
            continue
        name, reader = None, None
        if isinstance(node, ast.Call) and (reader := _reader(node)):
            name = _name_of(node, source.constants)
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
            reader, name = "os.environ", _name_of(ast.Call(node.value, [node.slice], []), source.constants)
        if name is None or reader is None or name in NOT_SETTINGS:
            continue
        statement = _statement(node, parents)
        read = Read(name, reader, source.where, node.lineno, comment=_comment(source, statement),
                    section=_section(source, node.lineno))
        if isinstance(node, ast.Call):
            _fill_default(read, node, reader, source.constants)
            if reader == "env_choice" and len(node.args) > 1:
                with contextlib.suppress(Unknown):
                    read.choices = tuple(value(node.args[1], source.constants))
        found.append(read)
    yield from sorted(found, key=lambda r: r.line)


def _fill_default(read: Read, call: ast.Call, reader: str, constants: dict[str, Any]) -> None:
    default = _default(call, reader)
    if default is not None:
        with contextlib.suppress(Unknown):
            read.default, read.has_default = value(default, constants), True
    minimum = next((k.value for k in call.keywords if k.arg == "minimum"), None)
    if minimum is not None:
        read.minimum = value(minimum, constants)


def script_defaults(path: Path = SCRIPTS) -> dict[str, str]:
    """`${NAME:-default}` in a shell script: what `make run` uses when NAME is unset."""
    return {m.group("name"): m.group("default") for m in SCRIPT_DEFAULT.finditer(path.read_text(encoding="utf-8"))}


def _shown(default: Any) -> str:
    if isinstance(default, bool):
        return "`true`" if default else "`false`"
    if default in ("", []):
        return "empty"
    if isinstance(default, list):
        return f"`{','.join(map(str, default))}`"
    return f"`{default}`"


def _cell(text: str) -> str:
    return cell(text)


def _read_as(read: Read) -> str:
    kind = READERS.get(read.reader, "text").format(name=read.name, choices=" / ".join(f"`{c}`" for c in read.choices))
    if read.minimum is not None:
        kind += f", at least {read.minimum}"
    return kind


def _default_cell(read: Read, words: Help, script: str | None, problems: list[str]) -> str:
    numeric = read.has_default and not isinstance(read.default, str | list)
    if words.default and numeric and _shown(read.default).strip("`") not in words.default:
        problems.append(f"{read.name}: the code's default is {read.default!r}; settings_help.py says "
                        f"{words.default!r}")
    if words.default:
        cell = words.default
    elif read.has_default:
        cell = _shown(read.default)
    else:
        cell = "unset"
        problems.append(f"{read.name}: its default is not a plain value: give it words in settings_help.py")
    if script is not None and f"`{script}`" not in cell:
        cell += f" (`make run`: `{script}`)"
    return cell


def _row(read: Read, words: Help | None, scripts: dict[str, str], problems: list[str]) -> str:
    if words is None:
        problems.append(f"{read.name} ({read.where}) has no entry in tools/docs/settings_help.py")
        words = Help("")
    meaning = _cell(words.meaning)
    if read.comment:
        meaning += f"<br>*In `{read.where}`:* {_cell(read.comment)}"
    default = _default_cell(read, words, scripts.get(read.name), problems)
    return f"| `{read.name}` | {_read_as(read)} | {_cell(default)} | {meaning} |"


HEADER = ["| variable | read as | default | meaning |", "| --- | --- | --- | --- |"]


def _unique(found: list[Read]) -> list[Read]:
    seen: set[str] = set()
    out = []
    for read in found:
        if read.name not in seen:
            seen.add(read.name)
            out.append(read)
    return out


def _modules(parts: tuple[str, ...]) -> list[Path]:
    paths: list[Path] = []
    for part in parts:
        base = ROOT / part
        paths.extend([base] if base.is_file() else sorted(p for p in base.rglob("*.py") if "migrations" not in p.parts))
    return paths


def _collect(paths: list[Path], skip: Path | None = None) -> list[Read]:
    return _unique([read for path in paths if path != skip for read in reads(Source.read(path))])


def _portal_part(scripts: dict[str, str], problems: list[str]) -> list[str]:
    lines: list[str] = []
    section = None
    for read in _unique(list(reads(Source.read(SETTINGS)))):
        title = read.section or "Basics"
        if title != section:
            section = title
            lines += ["", f"### {title}", "", *HEADER]
        lines.append(_row(read, settings_help.PORTAL.get(read.name), scripts, problems))
    return lines


def _table(found: list[Read], words: dict[str, Help], scripts: dict[str, str], problems: list[str]) -> list[str]:
    return ["", *HEADER, *(_row(read, words.get(read.name), scripts, problems) for read in found)]


def _script_rows(scripts: dict[str, str], known: set[str], problems: list[str]) -> list[str]:
    rows = []
    for name, default in scripts.items():
        if name in known:
            continue
        words = settings_help.SCRIPTS.get(name)
        if words is None:
            problems.append(f"{name} ({SCRIPTS.relative_to(ROOT)}) has no entry in tools/docs/settings_help.py")
            words = Help("")
        rows.append(f"| `{name}` | text | `{default}` | {_cell(words.meaning)} |")
    return ["", *HEADER, *rows]


def _unused(found: set[str], problems: list[str]) -> None:
    for table in (settings_help.PORTAL, settings_help.WORKERS, settings_help.SCRIPTS, settings_help.CLIENT):
        problems.extend(f"{name}: in settings_help.py but read nowhere" for name in table if name not in found)


INTRO = """\
# Settings and environment variables

Every setting is an environment variable. A bad value stops the portal with the variable's name
(`DEBUG: 'maybe' is not a boolean; use true or false`). Every secret can also be read from a file
named by `<NAME>_FILE` (how Kubernetes and Docker mount secrets). This page is generated from the code:
each variable below is one the code reads, with the default the code gives it. What `manage.py check`
requires in production is in [Production](../how-to/operators/production.md#what-the-checks-require).
"""


def render() -> dict[Path, str]:
    problems: list[str] = []
    scripts = script_defaults()
    portal = _portal_part(scripts, problems)
    settings_names = {read.name for read in reads(Source.read(SETTINGS))}
    workers = [r for r in _collect(_modules(PORTAL_APPS), skip=SETTINGS) if r.name not in settings_names]
    client = _collect(_modules(CLIENT_PARTS))
    lines = [
        banner("tools.docs.gen_settings").rstrip("\n"), "", INTRO,
        "## The portal and its workers (`portal/settings.py`)",
        "",
        "Read by every portal process (web, Celery workers, beat) at start, through `core/env.py`.",
        *portal,
        "",
        "## Read where they are used",
        "",
        "Read where they are used (the Celery workers' Kubernetes engine, `manage.py bootstrap`), not in "
        "`portal/settings.py`.",
        *_table(workers, settings_help.WORKERS, scripts, problems),
        "",
        "## `make run` (`scripts/common.sh`)",
        "",
        "`make run` sets `DEBUG=false` and `PADDLECLOUD_EMBEDDED=true` unless they are set (the defaults above",
        "say so), and reads these of its own:",
        *_script_rows(scripts, settings_names, problems),
        "",
        "## paddlectl and the SDK",
        "",
        "Read on the user's machine by the client package (`client/paddlecloud/sdk`, `client/paddlecloud/ctl`).",
        "What a job's own processes see is in [The job's environment](job-environment.md).",
        *_table(client, settings_help.CLIENT, {}, problems),
    ]
    _unused(settings_names | {r.name for r in workers + client} | set(scripts), problems)
    if problems:
        raise SystemExit("tools/docs/gen_settings.py:\n  " + "\n  ".join(problems))
    return {OUTPUT: "\n".join(lines).rstrip("\n") + "\n"}


def main(argv: list[str] | None = None) -> int:
    return main_for(render, "Write (or --check) docs/reference/settings.md from the code's environment reads.", argv)


if __name__ == "__main__":
    sys.exit(main())
