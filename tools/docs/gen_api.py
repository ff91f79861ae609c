"""docs/reference/api.md and docs/reference/openapi.yaml: the REST API from its OpenAPI schema.

The schema is the one the portal serves at /api/schema/, made by drf-spectacular (`manage.py spectacular`,
in a process of its own so this module needs no Django set up). openapi.yaml is that file as it is; api.md
lists every path and method with its summary (the view's description), its parameters and its answers.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from tools.docs.common import REFERENCE, ROOT, banner, cell, main_for

OUTPUT = REFERENCE / "api.md"
SCHEMA = REFERENCE / "openapi.yaml"
METHODS = ("get", "post", "put", "patch", "delete")
SCHEMA_DATABASE = "postgresql://docs:docs@127.0.0.1:1/docs"  # port 1: never a server


def schema_text() -> str:
    """The OpenAPI schema as `manage.py spectacular` writes it (YAML)."""
    # Integer fields' bounds in the schema are the database's: it is made as production serves it, on PostgreSQL,
    # whatever database this machine uses (the URL is only parsed: nothing connects to it).
    env = {name: value for name, value in os.environ.items() if name != "DATABASE_URL_FILE"}
    env["DATABASE_URL"] = SCHEMA_DATABASE
    env.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "schema.yaml"
        done = subprocess.run(
            [sys.executable, "manage.py", "spectacular", "--format", "openapi", "--file", str(target)],
            cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=300,
        )
        if done.returncode != 0:
            raise SystemExit(f"manage.py spectacular failed ({done.returncode}):\n{done.stderr[-4000:]}")
        return target.read_text(encoding="utf-8")


def _text(text: str, in_cell: bool = False) -> str:
    """Markdown for a description: HTML-escaped outside code spans; one line, table syntax escaped, in a cell."""
    if in_cell:
        return cell(text, escape_html=True)
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(part if part.startswith("`") else html.escape(part, quote=False) for part in parts).strip()


def _summary(operation: dict[str, Any]) -> str:
    """The description's first sentence; without one, what a success answers."""
    text = " ".join((operation.get("summary") or operation.get("description") or "").split())
    if text:
        return _text(re.split(r"(?<=\.)\s", text, maxsplit=1)[0], in_cell=True)
    for status, answer in operation.get("responses", {}).items():
        if status.startswith("2"):
            schemas = [_ref_name(spec.get("schema", {})) for spec in answer.get("content", {}).values()]
            if schemas and schemas[0]:
                return f"answers {schemas[0]}"
            return _text(answer.get("description", ""), in_cell=True)
    return ""


def _operations(schema: dict[str, Any]) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(path, method, anchor, operation) for every operation, in the schema's order; anchors are unique."""
    found: list[tuple[str, str, str, dict[str, Any]]] = []
    taken: set[str] = set()
    for path, item in schema.get("paths", {}).items():
        for method in METHODS:
            if method not in item:
                continue
            anchor = f"{method}-" + re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")
            if path.endswith("/") and path != "/":
                anchor += "-slash" if anchor + "-slash" not in taken else ""
            while anchor in taken:
                anchor += "-again"
            taken.add(anchor)
            found.append((path, method, anchor, item[method]))
    return found


def _link(ref: str) -> str:
    name = ref.rsplit("/", 1)[-1]
    return f"[`{name}`](#schema-{name.lower()})"


def _ref_name(node: dict[str, Any]) -> str:
    """A schema node as a short type: a link to a component, `list of ...`, one of several, or the plain type."""
    if "$ref" in node:
        return _link(node["$ref"])
    for key in ("allOf", "oneOf", "anyOf"):
        if key in node:
            return " or ".join(t for t in (_ref_name(n) for n in node[key]) if t)
    if node.get("type") == "array":
        return f"list of {_ref_name(node.get('items', {}))}".strip()
    kind = node.get("type", "")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    fmt = node.get("format")
    return f"{kind} ({fmt})" if kind and fmt else str(kind)


def _parameters(operation: dict[str, Any]) -> list[str]:
    rows = []
    for param in operation.get("parameters", []):
        required = "yes" if param.get("required") else ""
        kind = _ref_name(param.get("schema", {}))
        rows.append(f"| `{param['name']}` | {param.get('in', '')} | {kind} | {required} | "
                    f"{_text(param.get('description', ''), in_cell=True)} |")
    if not rows:
        return []
    return ["| parameter | in | type | required | meaning |", "| --- | --- | --- | --- | --- |", *rows, ""]


def _body(operation: dict[str, Any]) -> list[str]:
    content = operation.get("requestBody", {}).get("content", {})
    kinds = [f"`{media}` {_ref_name(spec.get('schema', {}))}".rstrip() for media, spec in content.items()]
    return [f"**Body:** {', '.join(kinds)}", ""] if kinds else []


def _responses(operation: dict[str, Any]) -> list[str]:
    parts = []
    for status, answer in operation.get("responses", {}).items():
        schemas = [_ref_name(spec.get("schema", {})) for spec in answer.get("content", {}).values()]
        what = ", ".join(s for s in schemas if s) or _text(answer.get("description", ""), in_cell=True)
        parts.append(f"`{status}` {what}".rstrip())
    return [f"**Answers:** {'; '.join(parts)}", ""] if parts else []


def _property(name: str, node: dict[str, Any], required: set[str]) -> str:
    notes = [_text(node.get("description", ""), in_cell=True)]
    if node.get("readOnly"):
        notes.insert(0, "read-only.")
    if node.get("nullable"):
        notes.append("May be null.")
    return (f"| `{name}` | {_ref_name(node)} | {'yes' if name in required else ''} | "
            f"{' '.join(n for n in notes if n)} |")


def _component(name: str, node: dict[str, Any]) -> list[str]:
    lines = [f"### `{name}` {{ #schema-{name.lower()} }}", ""]
    if node.get("description"):
        lines += [_text(node["description"]), ""]
    if "enum" in node:
        values = ", ".join(f"`{v}`" for v in node["enum"] if v not in ("", None))
        lines += [f"One of: {values or '(blank)'}.", ""]
    properties = node.get("properties", {})
    if properties:
        required = set(node.get("required", []))
        lines += ["| field | type | required | notes |", "| --- | --- | --- | --- |"]
        lines += [_property(field, spec, required) for field, spec in properties.items()]
        lines.append("")
    elif "enum" not in node:
        lines += [f"Type: {_ref_name(node) or 'any'}.", ""]
    return lines


def render_markdown(schema: dict[str, Any]) -> str:
    operations = _operations(schema)
    info = schema.get("info", {})
    lines = [
        banner("tools.docs.gen_api").rstrip("\n"),
        "",
        "# REST API operations",
        "",
        f"{_text(info.get('description', ''))} ({info.get('title', '')} {info.get('version', '')}.)",
        "",
        "Every operation of the API, generated from the OpenAPI schema the portal serves at `/api/schema/`",
        "(browsable at `/api/docs/` on a running portal). The same schema as a file: [openapi.yaml](openapi.yaml).",
        "Authentication, the error shape, pagination and the routes by topic: [REST API](rest-api.md).",
        "",
        "| method | path | summary |",
        "| --- | --- | --- |",
        *(f"| [{m.upper()}](#{a}) | `{p}` | {_summary(op)} |" for p, m, a, op in operations),
        "",
    ]
    current = None
    for path, method, anchor, operation in operations:
        if path != current:
            current = path
            lines += [f"## `{path}`", ""]
        lines += [f"### {method.upper()} `{path}` {{ #{anchor} }}", ""]
        description = operation.get("description", "").strip()
        if description:
            lines += [_text(description), ""]
        lines += [f"Operation id: `{operation.get('operationId', '')}`.", ""]
        lines += _parameters(operation) + _body(operation) + _responses(operation)
    lines += ["## Schemas", "", "The objects the operations above take and answer (`components.schemas`).", ""]
    for name, node in schema.get("components", {}).get("schemas", {}).items():
        lines += _component(name, node)
    return "\n".join(lines).rstrip("\n") + "\n"


def render() -> dict[Path, str]:
    text = schema_text()
    return {SCHEMA: text, OUTPUT: render_markdown(yaml.safe_load(text))}


def main(argv: list[str] | None = None) -> int:
    return main_for(render, "Write (or --check) docs/reference/api.md and openapi.yaml from the API schema.", argv)


if __name__ == "__main__":
    sys.exit(main())
