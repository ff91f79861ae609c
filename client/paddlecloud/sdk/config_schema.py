"""The config file's shape as a JSON Schema, each violation named by its line and key.

jsonschema-rs checks it (it imports in ~25 ms where `jsonschema` takes ~300 ms of every paddlectl
command). The schema says what each key holds; `first_problem` turns the errors into one message about
the YAML the user wrote, using the composed node tree only to find lines. What a schema cannot say
(URLs, names used twice, which datacenter is current) stays in config.parse.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

import jsonschema_rs
import yaml

TOP_KEYS = ("datacenters", "current-datacenter")
ENTRY_KEYS = ("name", "username", "password", "endpoint", "datacenter")
REQUIRED_ENTRY_KEYS = ("name", "username", "endpoint")

_TEXT = {"type": "string"}
_OPTIONAL_TEXT = {"type": ["string", "null"]}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["datacenters"],
    "properties": {
        "datacenters": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": list(REQUIRED_ENTRY_KEYS),
                "properties": {
                    "name": _TEXT,
                    "username": _TEXT,
                    "endpoint": _TEXT,
                    "password": _OPTIONAL_TEXT,
                    "datacenter": _OPTIONAL_TEXT,
                },
            },
        },
        "current-datacenter": _OPTIONAL_TEXT,
    },
}
_VALIDATOR = jsonschema_rs.Draft202012Validator(SCHEMA)
Kind = jsonschema_rs.ValidationErrorKind
# A wrong shape says most, then an unknown key (often the typo of a missing one), then a missing key.
_PRIORITY = {"Type": 0, "AdditionalProperties": 1, "Required": 2, "MinItems": 3}


def node_at(root: yaml.Node | None, path: Sequence[str | int]) -> yaml.Node | None:
    """The value node at `path` (keys and list indexes), or the deepest node found on the way."""
    node = root
    for step in path:
        found = _child(node, step)
        if found is None:
            return node
        node = found
    return node


def _child(node: yaml.Node | None, step: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        return next((value for key, value in node.value if key.value == step), None)
    if isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
        child: yaml.Node = node.value[step]
        return child
    return None


def key_node(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        return next((k for k, _ in node.value if k.value == key), None)
    return None


def line(node: yaml.Node | None) -> str:
    return f" line {node.start_mark.line + 1}" if node is not None else ""


def suggest(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else f"; expected one of: {', '.join(choices)}"


def label(path: Sequence[str | int]) -> str:
    """`datacenters[1].password` for ['datacenters', 1, 'password']."""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text


def first_problem(data: Any, root: yaml.Node | None, where: str) -> str | None:
    """The message of the most telling violation (earliest in the file among equals), or None."""
    errors = list(_VALIDATOR.iter_errors(data))
    if not errors:
        return None
    error = min(errors, key=lambda e: (_PRIORITY.get(_kind(e), 9), _line_number(root, e)))
    return _describe(error, root, where)


def _kind(error: jsonschema_rs.ValidationError) -> str:
    return type(error.kind).__name__  # the class names _PRIORITY lists


def _line_number(root: yaml.Node | None, error: jsonschema_rs.ValidationError) -> int:
    node = node_at(root, list(error.instance_path))
    return node.start_mark.line if node is not None else 0


def _describe(error: jsonschema_rs.ValidationError, root: yaml.Node | None, where: str) -> str:
    path = list(error.instance_path)
    node = node_at(root, path)
    at, name = f"{where}{line(node)}", label(path)
    match error.kind:
        case Kind.AdditionalProperties(unexpected):
            allowed = ENTRY_KEYS if path else TOP_KEYS
            unknown = next((key for key in _in_file_order(node) if key in unexpected), unexpected[0])
            prefix = f"{name}: " if name else ""
            return f"{where}{line(key_node(node, unknown))}: {prefix}unknown key {unknown!r}{suggest(unknown, allowed)}"
        case Kind.Required(missing) if path:
            return f"{at}: {name} has no `{missing}:`"
        case Kind.Required() | Kind.MinItems():
            return f"{at}: `datacenters:` is missing or empty; add at least one"
    return _wrong_type(error.instance, path, at, name)


def _in_file_order(node: yaml.Node | None) -> list[str]:
    return [str(key.value) for key, _ in node.value] if isinstance(node, yaml.MappingNode) else []


def _wrong_type(value: Any, path: list[str | int], at: str, name: str) -> str:
    if not path:
        return f"{at}: must be a mapping with `datacenters:` and `current-datacenter:`"
    if path == ["datacenters"]:
        if value is None:
            return f"{at}: `datacenters:` is missing or empty; add at least one"
        return f"{at}: `datacenters:` must be a list of `- name: ...` entries"
    if len(path) == 2:
        return f"{at}: {name} must be a mapping with name, username and endpoint"
    if value is None:
        return f"{at}: {name} is empty"
    return f"{at}: {name} must be text, not {type(value).__name__} ({value!r}); put it in quotes"
