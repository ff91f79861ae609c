# Shared by run.sh and stop.sh: where the background portal and worker keep pids and logs.
VAR_DIR=${PADDLECLOUD_VAR_DIR:-$PWD/var}
PORT=${PADDLECLOUD_PORT:-8000}
PORTAL_URL=${PADDLECLOUD_PUBLIC_URL:-http://127.0.0.1:$PORT}
export PADDLECLOUD_PUBLIC_URL=$PORTAL_URL
RUN_DIR=$VAR_DIR/run
LOG_DIR=$VAR_DIR/log
mkdir -p "$RUN_DIR" "$LOG_DIR"

is_running() {  # pidfile -> 0 when its process group is alive
  [ -f "$1" ] && kill -0 -- "-$(cat "$1")" 2>/dev/null
}

start_bg() {  # name, command...: start in a new session so stop.sh can end the whole group
  local name=$1; shift
  if is_running "$RUN_DIR/$name.pid"; then
    echo "$name already running (pid $(cat "$RUN_DIR/$name.pid"))"
    return
  fi
  setsid "$@" >>"$LOG_DIR/$name.log" 2>&1 < /dev/null &
  echo $! > "$RUN_DIR/$name.pid"
  echo "$name started (pid $!, log $LOG_DIR/$name.log)"
}

start_portal() {
  start_bg portal .venv/bin/gunicorn portal.wsgi --bind "127.0.0.1:$PORT" --workers 2 --threads 4 \
    --timeout 600 --access-logfile -
}

start_worker() {
  start_bg worker .venv/bin/celery -A portal worker -B -s "$VAR_DIR/celery/beat-schedule" \
    --concurrency 2 -l info -n "paddlecloud@%h"
}

wait_for_portal() {
  for _ in $(seq 1 120); do
    if .venv/bin/python - "$PORTAL_URL" <<'PY' 2>/dev/null; then return 0; fi
import sys, urllib.request
urllib.request.urlopen(sys.argv[1] + "/api/v1/version", timeout=2).read()
PY
    is_running "$RUN_DIR/portal.pid" || { echo "the portal exited; see $LOG_DIR/portal.log" >&2; tail -20 "$LOG_DIR/portal.log" >&2; exit 1; }
    sleep 0.5
  done
  echo "the portal did not answer at $PORTAL_URL within 60s; see $LOG_DIR/portal.log" >&2
  exit 1
}

stop_bg() {  # name: SIGTERM the group, SIGKILL after a grace period
  local pidfile=$RUN_DIR/$1.pid
  if ! is_running "$pidfile"; then rm -f "$pidfile"; return; fi
  local pid; pid=$(cat "$pidfile")
  kill -TERM -- "-$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.25; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$pidfile"
  echo "$1 stopped"
}
