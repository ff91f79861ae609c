#!/usr/bin/env bash
# `make run`: bootstrap, start the portal and the Celery workers (jobs, with beat; notifications) in
# the background on the embedded defaults, then run the example training job end to end through the portal.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

is_running "$RUN_DIR/portal.pid" || require_free_port  # before any work; start_portal checks again
# The example's runtime (Paddle) installs while the portal migrates and starts; the job waits on its lock if it
# is not done by then. Its output goes to the log; a failure is the job's to report, with the reason.
mkdir -p "$LOG_DIR"
.venv/bin/python manage.py prepare_runtime > "$LOG_DIR/runtime.log" 2>&1 &
.venv/bin/python manage.py bootstrap --demo-user demo

start_portal
# The workers boot (each loads the apps, seconds of CPU) while the portal does: they need the migrated database,
# not the portal. A portal that never answers as ours stops them too.
start_worker
( wait_for_portal ) || { for lane in worker control side; do stop_bg "$lane" >&2; done; exit 1; }

if [ -x scripts/run-example.sh ]; then
  exec scripts/run-example.sh
fi
creds=$(.venv/bin/python -c "import json,sys; d=json.load(open('$VAR_DIR/demo-credentials.json')); print(d['username'], d['password'])")
echo
echo "PaddleCloud is running at $PORTAL_URL/ (log in as: $creds)"
echo "Logs: $VAR_DIR/log/portal.log, worker.log, control.log, side.log. Stop with: make stop"
