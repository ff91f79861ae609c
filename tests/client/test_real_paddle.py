"""Real PaddlePaddle jobs through paddlecloud-launch, by hand on 127.0.0.1 (slow: marked paddle).

The first run installs paddlepaddle==3.0.0 into the shared venv cache (~20 s); later runs reuse it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.paddle
ROOT = Path(__file__).resolve().parents[2]


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_local_by_hand", ROOT / "examples" / "run_local_by_hand.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _check(result, trainers: list[str]) -> None:  # type: ignore[no-untyped-def]
    logs = {k: p.read_text(errors="replace")[-3000:] if p.exists() else "" for k, p in result.logs.items()}
    assert result.ok, f"{result.reason}\n" + "\n".join(f"--- {k}\n{v}" for k, v in logs.items())
    for name in trainers:
        assert result.exit_codes[name] == 0
        losses = result.losses[name]
        assert len(losses) >= 5, logs[name]
        assert losses[-1] < losses[0] / 5, f"{name}: loss did not fall: {losses}"
    for pgid in result.pgids.values():  # launchers and everything they started are gone
        with pytest.raises(ProcessLookupError):
            os.killpg(pgid, 0)


def test_parameter_server_job_2_pservers_2_trainers(tmp_path: Path) -> None:
    result = _runner().run_job(ROOT / "examples" / "fit_a_line", trainers=2, pservers=2, output=tmp_path, timeout=600)
    _check(result, ["trainer_0", "trainer_1"])
    # pservers never exit by themselves: they were stopped (SIGTERM) after the trainers succeeded
    assert result.exit_codes["pserver_0"] == result.exit_codes["pserver_1"] == 143
    assert "serving the gloo rendezvous store" in result.logs["pserver_0"].read_text()


def test_collective_job_2_trainers(tmp_path: Path) -> None:
    result = _runner().run_job(ROOT / "examples" / "fit_a_line_collective", trainers=2, output=tmp_path, timeout=600)
    _check(result, ["trainer_0", "trainer_1"])
