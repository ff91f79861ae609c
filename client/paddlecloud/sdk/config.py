"""~/.paddle/config (or $PADDLE_CONFIG): the original paddlectl's YAML, validated with line numbers.

```yaml
datacenters:
- name: datacenter1          # the datacenter's name on the portal (or a label, with `datacenter:`)
  username: alice
  password: secret           # optional: `paddlectl login` asks when it is missing
  endpoint: http://127.0.0.1:8000
current-datacenter: datacenter1
```

Also here: the token cache, one file per endpoint and user under ~/.paddle/token_cache/ (mode 0600),
so a command logs in only when it has no token or the portal refused the cached one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from paddlecloud.contract.units import parse_time
from paddlecloud.sdk import config_schema as schema
from paddlecloud.sdk.errors import ConfigError


def config_path() -> Path:
    """$PADDLE_CONFIG, else ~/.paddle/config."""
    override = os.environ.get("PADDLE_CONFIG")
    return Path(override).expanduser() if override else Path.home() / ".paddle" / "config"


def shown(path: Path) -> str:
    """The path as the user would type it (~ for the home directory)."""
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class Datacenter:
    """One entry of `datacenters:`; `portal_name` is the datacenter's name on the portal."""

    name: str
    username: str
    endpoint: str
    password: str | None = None
    portal_name: str = ""

    @property
    def home(self) -> str:
        return f"/pfs/{self.portal_name}/home/{self.username}"


@dataclass
class Config:
    path: Path
    datacenters: list[Datacenter]
    current_name: str
    warnings: list[str] = field(default_factory=list)

    def get(self, name: str) -> Datacenter:
        for entry in self.datacenters:
            if entry.name == name:
                return entry
        names = ", ".join(e.name for e in self.datacenters)
        raise ConfigError(f"{shown(self.path)}: no datacenter named {name!r}; configured: {names}")

    def current(self) -> Datacenter:
        return self.get(self.current_name)


# --- reading ----------------------------------------------------------------------------------


def _compose(text: str, where: str) -> tuple[Any, Any]:
    """(data, node): the parsed document and its node tree, which knows the line of everything."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = exc.problem or exc.context or "syntax error"
        raise ConfigError(f"{where}{line}: not valid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML: {exc}") from None
    finally:
        loader.dispose()
    return data, node


def check_endpoint(value: str) -> str | None:
    """The problem with an endpoint URL, or None. http(s)://host[:port][/path], no query or fragment."""
    try:
        parts = urlsplit(value)
        port = parts.port  # raises on a bad port
    except ValueError as exc:
        return f"{value!r} is not a valid URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{value!r} is not an http(s) URL; write it like http://127.0.0.1:8000"
    if parts.query or parts.fragment:
        return f"{value!r} must not have a query or fragment"
    if port == 0:
        return f"{value!r} has port 0"
    return None


def parse(text: str, path: Path) -> Config:
    """Validate the config text; every problem names the file, the line and the key."""
    where = shown(path)
    data, root = _compose(text, where)
    if data is None:
        raise ConfigError(f"{where}: the file is empty; it needs `datacenters:` and `current-datacenter:`")
    problem = schema.first_problem(data, root, where)
    if problem:
        raise ConfigError(problem)
    datacenters: list[Datacenter] = []
    for index, entry in enumerate(data["datacenters"]):
        datacenters.append(_entry(entry, schema.node_at(root, ["datacenters", index]), where, index, datacenters))
    names = ", ".join(d.name for d in datacenters)
    current_at = f"{where}{schema.line(schema.node_at(root, ['current-datacenter']))}"
    current = (data.get("current-datacenter") or "").strip()
    if not current:
        raise ConfigError(
            f"{current_at}: `current-datacenter:` is missing; add `current-datacenter: "
            f"{datacenters[0].name}` (configured: {names})"
        )
    if current not in {d.name for d in datacenters}:
        raise ConfigError(
            f"{current_at}: current-datacenter {current!r} is not one of the configured datacenters: {names}"
        )
    return Config(path=path, datacenters=datacenters, current_name=current)


def _entry(entry: dict[str, Any], node: Any, where: str, index: int, before: list[Datacenter]) -> Datacenter:
    """One `datacenters:` entry the schema accepted: the rules between its fields and the other entries."""
    at, label = f"{where}{schema.line(node)}", f"datacenters[{index}]"
    name = entry["name"].strip()
    problem = check_endpoint(entry["endpoint"].strip())
    if problem:
        raise ConfigError(f"{where}{schema.line(schema.node_at(node, ['endpoint']))}: {label}.endpoint: {problem}")
    if not name:
        raise ConfigError(f"{at}: {label}.name is empty")
    if any(d.name == name for d in before):
        raise ConfigError(f"{at}: {label}: the name {name!r} is used twice")
    portal_name = (entry.get("datacenter") or name).strip()
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", portal_name):
        key = "datacenter" if entry.get("datacenter") else "name"
        raise ConfigError(
            f"{where}{schema.line(schema.node_at(node, [key]))}: {label}.{key} {portal_name!r} is not a datacenter "
            "name on the portal; add `datacenter: <name on the portal>` and keep `name:` as your label"
        )
    return Datacenter(
        name=name,
        username=entry["username"].strip(),
        endpoint=entry["endpoint"].strip().rstrip("/"),
        password=entry.get("password"),
        portal_name=portal_name,
    )


def load(path: Path | None = None) -> Config:
    """Read and validate the config file; a file others may read adds a warning."""
    path = path or config_path()
    where = shown(path)
    try:
        text = path.read_text(encoding="utf-8")
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise ConfigError(
            f"no config file at {where}; create it with `paddlectl config init --endpoint URL --username NAME` "
            "(or point PADDLE_CONFIG at one)"
        ) from None
    except IsADirectoryError:
        raise ConfigError(f"{where} is a directory, not a config file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {where}: {exc.strerror}") from None
    config = parse(text, path)
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        config.warnings.append(
            f"{where} can be read by other users (mode {stat.S_IMODE(mode):04o}); "
            f"it holds your password: run `chmod 600 {where}`"
        )
    return config


# --- writing ----------------------------------------------------------------------------------


def _private_dir(directory: Path) -> None:
    """Create `directory` and any missing parents with mode 0700 (existing ones are left alone)."""
    missing = []
    while not directory.exists():
        missing.append(directory)
        if directory.parent == directory:
            break
        directory = directory.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)


def _write_private(path: Path, text: str) -> None:
    """Write atomically with mode 0600 (directories we create 0700)."""
    _private_dir(path.parent)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        Path(temp).chmod(0o600)
        Path(temp).replace(path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def save_entry(path: Path, entry: Datacenter, make_current: bool = True) -> None:
    """Add or replace one datacenter entry (by name) and make it current; other entries are kept."""
    entries: list[dict[str, Any]] = []
    current = entry.name
    if path.exists():
        try:
            old = load(path)
        except ConfigError as exc:
            raise ConfigError(f"{exc}; fix or remove the file first") from None
        current = entry.name if make_current else old.current_name
        for existing in old.datacenters:
            if existing.name != entry.name:
                entries.append(_as_dict(existing))
    entries.append(_as_dict(entry))
    text = yaml.safe_dump({"datacenters": entries, "current-datacenter": current}, sort_keys=False)
    _write_private(path, text)


def _as_dict(entry: Datacenter) -> dict[str, Any]:
    data: dict[str, Any] = {"name": entry.name, "username": entry.username}
    if entry.password is not None:
        data["password"] = entry.password
    data["endpoint"] = entry.endpoint
    if entry.portal_name and entry.portal_name != entry.name:
        data["datacenter"] = entry.portal_name
    return data


def set_current(path: Path, name: str) -> Config:
    """Switch current-datacenter, editing that one line so comments and layout stay."""
    config = load(path)
    config.get(name)  # refuses an unknown name, listing the configured ones
    text = path.read_text(encoding="utf-8")
    pattern = re.compile(r"^current-datacenter:.*$", re.MULTILINE)
    line = f"current-datacenter: {json.dumps(name) if not re.fullmatch(r'[A-Za-z0-9._-]+', name) else name}"
    text = pattern.sub(line, text, count=1) if pattern.search(text) else text.rstrip("\n") + "\n" + line + "\n"
    mode = stat.S_IMODE(path.stat().st_mode)
    _write_private(path, text)
    path.chmod(mode)
    config = parse(text, path)
    return config


# --- token cache ------------------------------------------------------------------------------


def token_cache_dir() -> Path:
    override = os.environ.get("PADDLE_TOKEN_CACHE")
    return Path(override).expanduser() if override else Path.home() / ".paddle" / "token_cache"


class TokenCache:
    """One JSON file per (endpoint, user): {"endpoint", "username", "token", "expires_at"}, mode 0600."""

    def __init__(self, endpoint: str, username: str, directory: Path | None = None) -> None:
        self.endpoint = endpoint
        self.username = username
        key = hashlib.sha256(f"{endpoint}\n{username}".encode()).hexdigest()[:32]
        self.path = (directory or token_cache_dir()) / key

    def read(self) -> str | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # missing or damaged: log in again
        if not isinstance(data, dict) or data.get("endpoint") != self.endpoint or data.get("username") != self.username:
            return None
        token = data.get("token")
        expires = data.get("expires_at")
        if isinstance(expires, str) and _expired(expires):
            return None
        return token if isinstance(token, str) and token else None

    def write(self, token: str, expires_at: str | None) -> None:
        payload = {"endpoint": self.endpoint, "username": self.username, "token": token, "expires_at": expires_at}
        _write_private(self.path, json.dumps(payload))

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def _expired(stamp: str) -> bool:
    when = parse_time(stamp)
    if when is None:
        return True
    # A minute early, so a long command does not start with a token about to lapse.
    return when - timedelta(minutes=1) <= datetime.now(UTC)
