"""Running the image builds' commands with each one echoed first (`+ cmd`), as a shell's `set -x` would."""

from __future__ import annotations

import subprocess
from typing import Any


def run(*cmd: str, **kwargs: Any) -> None:
    """Echo `cmd` (its first 200 characters) and run it; CalledProcessError when it fails."""
    print("+", " ".join(cmd)[:200], flush=True)
    subprocess.run(cmd, check=True, **kwargs)
