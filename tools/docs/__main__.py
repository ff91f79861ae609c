"""`python -m tools.docs [--check]`: every generated reference page (cli.md, settings.md, api.md, openapi.yaml)."""

from __future__ import annotations

import sys
from pathlib import Path

from tools.docs import gen_api, gen_cli, gen_settings
from tools.docs.common import main_for


def render_all() -> dict[Path, str]:
    return {**gen_cli.render(), **gen_settings.render(), **gen_api.render()}


if __name__ == "__main__":
    sys.exit(main_for(render_all, "Write (or --check) every generated page of docs/reference/."))
