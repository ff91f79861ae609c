"""manage.py prepare_runtime: build the local engine's default runtime now, before a job needs it.

`make run` starts it in the background while the portal migrates and starts, so the example job finds Paddle
installed; a job that comes first waits for it on the runtime's file lock instead of building it twice.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from paddlecloud.contract import venvcache

from jobs.engines.local import runtimes


class Command(BaseCommand):
    help = "Build the local engine's default runtime (Paddle and the client) into the runtime cache."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            venv = venvcache.ensure_base(
                runtimes.DEFAULT_RUNTIME, runtimes.DEFAULT_REQUIREMENTS, runtimes.client_dir(),
                runtimes.cache_root() / "runtimes", self.stdout.write,
            )  # fmt: skip
        except (venvcache.VenvError, OSError) as exc:
            raise CommandError(f"the default runtime could not be built: {exc}") from None
        self.stdout.write(f"default runtime ready in {venv}")
