"""The local engine's build step: installs a package's requirements.txt as a layer on the runtime it runs in.

``python -m paddlecloud.runtime.layer <requirements.txt> <cache>`` is the local engine's build step: it runs
in a sandbox of its own before any process of the job starts, where only that layer's folder and lock are
writable (the job's home and the rest of the user's layer cache are read-only or absent), so the job itself
never writes an environment it runs in. Its output (pip's, and its own ``[paddlecloud-launch]`` lines, the
launcher's words for the same step) goes to stdout; it exits 0 with the layer complete, or
``exitcodes.VENV`` (70) with ``error: installing requirements failed: <pip's last error line>`` last.
"""

from __future__ import annotations

import sys
from pathlib import Path

from paddlecloud.contract import exitcodes, venvcache

_PREFIX = "[paddlecloud-launch] "


def say(line: str) -> None:
    """One line of the build's log, as the launcher writes its own."""
    sys.stdout.write(f"{_PREFIX}{line}\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        say("error: usage: python -m paddlecloud.runtime.layer <requirements.txt> <cache>")
        return exitcodes.BAD_FACTS
    requirements, cache = Path(args[0]), Path(args[1])
    try:
        venvcache.ensure_layer(requirements, cache, say)  # pip's lines too, as the launcher shows them
    except venvcache.VenvError as exc:
        say(f"error: {exc}")
        return exitcodes.VENV
    except OSError as exc:
        say(f"error: installing requirements failed: {exc}")
        return exitcodes.VENV
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
