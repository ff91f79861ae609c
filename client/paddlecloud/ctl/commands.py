"""paddlectl's command tree: the root group (`app`) with every command module attached.

paddlectl's commands are the original paddlectl's, with its single-dash flags (`-jobname`) and
`--jobname`. Each command is a thin layer: it reads flags, calls `jobs`, `files` or the session,
and prints. Importing a cmd_* module attaches its commands to the groups in `app`.
"""

from __future__ import annotations

from paddlecloud.ctl import (
    cmd_account,
    cmd_build,
    cmd_compare,
    cmd_config,
    cmd_describe,
    cmd_experiments,
    cmd_files,
    cmd_help,
    cmd_images,
    cmd_jobs,
    cmd_logs,
    cmd_metrics,
    cmd_queue,
    cmd_usage,
)
from paddlecloud.ctl.app import cli

COMMAND_MODULES = (
    cmd_jobs, cmd_logs, cmd_describe, cmd_experiments, cmd_queue, cmd_images, cmd_metrics, cmd_compare, cmd_files,
    cmd_build, cmd_account, cmd_usage, cmd_config, cmd_help,
)

__all__ = ["COMMAND_MODULES", "cli"]
