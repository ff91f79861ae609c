#!/usr/bin/env bash
# `make stop`: stop the portal and the workers that `make run` started. Running jobs are left running:
# their processes are not the workers' children, and the next worker (`make run`) adopts and follows them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
stop_bg side
stop_bg control
stop_bg worker
stop_bg portal
echo "Running jobs keep running; the next \`make run\` adopts them. To stop a job: paddlectl kill <job> (before make stop)."
