"""Requirement layers on a base env: keyed by requirements and base, reused, safe when two jobs install at once."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from paddlecloud.contract import venvcache

from .conftest import run_launcher

REQS = b"# no packages: still a real venv (pip runs and installs nothing)\n"


def test_key_depends_on_content_and_interpreter() -> None:
    a = venvcache.env_key(b"numpy==2.0\n", "/usr/bin/python3")
    assert a == venvcache.env_key(b"numpy==2.0\n", "/usr/bin/python3")
    assert a != venvcache.env_key(b"numpy==2.1\n", "/usr/bin/python3")
    assert a != venvcache.env_key(b"numpy==2.0\n", "/opt/other/python3")


def test_default_cache_dir(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("XDG_CACHE_HOME", "/x/cache")
    assert venvcache.default_cache_dir() == Path("/x/cache/paddlecloud/venvs")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert venvcache.default_cache_dir() == Path.home() / ".cache/paddlecloud/venvs"


def test_activate_puts_venv_first() -> None:
    env = venvcache.activate({"PATH": "/usr/bin", "PYTHONHOME": "/x"}, Path("/c/v"))
    assert env["PATH"] == "/c/v/bin:/usr/bin" and env["VIRTUAL_ENV"] == "/c/v" and "PYTHONHOME" not in env


CONCURRENT = """
import sys
from pathlib import Path
from paddlecloud.contract.venvcache import ensure_layer
ensure_layer(Path(sys.argv[1]), Path(sys.argv[2]), log=lambda m: print(m, flush=True))
"""


def test_concurrent_first_installs_make_one_venv_then_reuse(tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_bytes(REQS)
    cache = tmp_path / "cache"
    # A stale partial install (no marker) from a killed job must be wiped, not trusted.
    key = venvcache.layer_key(REQS, venvcache.current_base())
    (cache / key / "junk").mkdir(parents=True)
    procs = [
        subprocess.Popen([sys.executable, "-c", CONCURRENT, str(req), str(cache)], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    firsts = [o.splitlines()[0] for o in outs]
    assert sum(f.startswith("installing environment") for f in firsts) == 1, outs
    assert sum("using cached environment" in o for o in outs) == 1, outs
    assert sum("ready in" in o for o in outs) == 1, outs
    assert [p.name for p in cache.iterdir() if p.is_dir()] == [key]
    venv = cache / key
    assert (venv / venvcache.COMPLETE_MARKER).is_file() and not (venv / "junk").exists()
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    # third use: no install at all
    logs: list[str] = []
    assert venvcache.ensure_layer(req, cache, logs.append) == venv
    assert logs == [f"using cached environment {key}"]


def test_launcher_runs_entry_in_the_venv(tmp_path: Path, facts: dict[str, str]) -> None:
    pkg = Path(facts["PADDLECLOUD_PACKAGE_DIR"])
    (pkg / "requirements.txt").write_bytes(REQS)
    facts["PADDLECLOUD_ENTRY"] = 'echo "venv=$VIRTUAL_ENV"; python -c "import sys; print(\'prefix=\' + sys.prefix)"'
    r = run_launcher(facts, timeout=300)
    assert r.returncode == 0, r.stdout
    venv = Path(facts["PADDLECLOUD_VENV_CACHE"]) / venvcache.layer_key(REQS, venvcache.current_base())
    log = (Path(facts["PADDLECLOUD_OUTPUT_DIR"]) / "trainer_0" / "log.txt").read_text()
    assert f"venv={venv}" in log and f"prefix={venv}" in log
    assert "installing environment" in log and "ready in" in log
    r = run_launcher(facts, timeout=60)
    log = (Path(facts["PADDLECLOUD_OUTPUT_DIR"]) / "trainer_0" / "log.txt").read_text()
    assert log.count("using cached environment") == 1


def test_failed_install_exits_70_naming_pips_last_error_and_leaves_no_marker(
    tmp_path: Path, facts: dict[str, str]
) -> None:
    pkg = Path(facts["PADDLECLOUD_PACKAGE_DIR"])
    (pkg / "requirements.txt").write_text("-r does-not-exist.txt\n")
    facts["PADDLECLOUD_ENTRY"] = "echo should-not-run"
    r = run_launcher(facts, timeout=300)
    assert r.returncode == 70
    log = (Path(facts["PADDLECLOUD_OUTPUT_DIR"]) / "trainer_0" / "log.txt").read_text()
    last = [line for line in log.splitlines() if line.strip()][-1]
    assert last.startswith("[paddlecloud-launch] error: installing requirements failed: ERROR: "), log
    assert "does-not-exist.txt" in last and "should-not-run" not in log
    key = venvcache.layer_key((pkg / "requirements.txt").read_bytes(), venvcache.current_base())
    assert not (Path(facts["PADDLECLOUD_VENV_CACHE"]) / key / venvcache.COMPLETE_MARKER).exists()


def test_a_layer_sees_the_base_and_installs_nothing_the_base_has(tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("pip\n")  # the base (this venv) has pip: already satisfied, nothing downloaded
    logs: list[str] = []
    layer = venvcache.ensure_layer(req, tmp_path / "cache", logs.append)
    assert any("Requirement already satisfied: pip" in line for line in logs), logs
    site = next((layer / "lib").glob("python*/site-packages"))
    assert not (site / "pip").exists() and (site / venvcache.LAYER_PTH).is_file()
    out = subprocess.run(
        [str(layer / "bin" / "python"), "-c", "import sys, pip, paddlecloud; print(sys.prefix)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert out == str(layer)


def test_last_error_line_prefers_pips_error() -> None:
    lines = ["Collecting x", "ERROR: No matching distribution found for x==9", "", "notice: something"]
    assert venvcache.last_error_line(lines) == "ERROR: No matching distribution found for x==9"
    assert venvcache.last_error_line(["a", "b", " "]) == "b"
    assert venvcache.last_error_line([]) == "no output"


def test_the_client_is_installed_from_its_sources_alone_never_a_stale_build_folder(tmp_path: Path) -> None:
    client = tmp_path / "client"
    for name, text in {
        "pyproject.toml": "[project]\nname = 'paddlecloud'\n",
        "README.md": "readme\n",
        "paddlecloud/__init__.py": "",
        "paddlecloud/runtime/metrics.py": "NEW = 1\n",
        "build/lib/paddlecloud/metrics.py": "OLD = 1\n",  # what an earlier build left: pip would package it
        "paddlecloud/__pycache__/metrics.cpython-311.pyc": "x",
        "paddlecloud.egg-info/SOURCES.txt": "paddlecloud/metrics.py\n",
    }.items():
        (client / name).parent.mkdir(parents=True, exist_ok=True)
        (client / name).write_text(text)
    copy = venvcache._clean_copy(client, tmp_path / "copy")
    found = sorted(str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file())
    assert found == ["README.md", "paddlecloud/__init__.py", "paddlecloud/runtime/metrics.py", "pyproject.toml"]
    assert venvcache.client_hash(copy) == venvcache.client_hash(client)  # what is installed is what was hashed


def test_a_base_built_before_bytecode_is_compiled_once_and_not_reinstalled(tmp_path: Path) -> None:
    """Jobs only read a base, so its modules are compiled when it is made ready; a base an older portal left
    uncompiled (uv compiles nothing by default) gets compiled once, its packages left as they are."""
    client = tmp_path / "client"
    (client / "paddlecloud").mkdir(parents=True)
    (client / "pyproject.toml").write_text("[project]\nname = 'paddlecloud'\n")
    (client / "paddlecloud" / "__init__.py").write_text("")
    cache, requirements = tmp_path / "runtimes", "# nothing\n"
    base = cache / f"old-{venvcache.env_key(requirements.encode(), venvcache.base_python())[:16]}"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(base)], check=True)
    module = venvcache._site_packages(base) / "trainlib.py"
    module.write_text("STEPS = 3\n")
    (base / venvcache.COMPLETE_MARKER).write_text("then\n")
    (base / venvcache.CLIENT_MARKER).write_text(venvcache.client_hash(client) + "\n")
    lines: list[str] = []
    assert venvcache.ensure_base("old", requirements, client, cache, log=lines.append) == base
    compiled = Path(importlib.util.cache_from_source(str(module)))
    assert compiled.is_file() and (base / venvcache.BYTECODE_MARKER).is_file()
    assert not any("install" in line for line in lines), lines  # compiled, not reinstalled
    made = compiled.stat().st_mtime_ns
    lines.clear()
    assert venvcache.ensure_base("old", requirements, client, cache, log=lines.append) == base
    assert lines == [] and compiled.stat().st_mtime_ns == made  # ready: nothing done the second time
