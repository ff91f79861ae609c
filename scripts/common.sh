# Shared by run.sh and stop.sh: where the background portal and worker keep pids and logs.
VAR_DIR=${PADDLECLOUD_VAR_DIR:-$PWD/var}
PORT=${PADDLECLOUD_PORT:-8000}
# Production-like unless a developer asks for DEBUG=true: the embedded single-host portal, on
# loopback, with generated secrets, SQLite and the filesystem broker (portal/settings.py).
export DEBUG=${DEBUG:-false}
export PADDLECLOUD_EMBEDDED=${PADDLECLOUD_EMBEDDED:-true}
PORTAL_URL=${PADDLECLOUD_PUBLIC_URL:-http://127.0.0.1:$PORT}
export PADDLECLOUD_PUBLIC_URL=$PORTAL_URL
RUN_DIR=$VAR_DIR/run
LOG_DIR=$VAR_DIR/log
mkdir -p "$RUN_DIR" "$LOG_DIR"

started_at() {  # pid -> its start time (clock ticks since boot, /proc/<pid>/stat field 22); fails if gone
  local stat; stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }  # past "pid (comm) ": comm may hold spaces and parentheses
  set -- $stat
  echo "${20}"
}

is_running() {  # pidfile -> 0 when the process it names is alive and is still the one we started
  # The leader itself, not its group: right after a SIGKILL its children may linger a moment, and a
  # restart then must not be refused. The start time (line 2) tells a reused pid from ours.
  [ -f "$1" ] || return 1
  local pid recorded now
  { read -r pid; read -r recorded || true; } < "$1"
  now=$(started_at "$pid") || return 1
  [ -z "$recorded" ] || [ "$recorded" = "$now" ]
}

start_bg() {  # name, command...: start in a new session so stop.sh can end the whole group
  local name=$1; shift
  if is_running "$RUN_DIR/$name.pid"; then
    echo "$name already running (pid $(head -n1 "$RUN_DIR/$name.pid"))"
    return
  fi
  setsid "$@" >>"$LOG_DIR/$name.log" 2>&1 < /dev/null &
  local pid=$!
  printf '%s\n%s\n' "$pid" "$(started_at "$pid" || true)" > "$RUN_DIR/$name.pid"
  echo "$name started (pid $pid, log $LOG_DIR/$name.log)"
}

require_free_port() {  # stop, naming the port, unless 127.0.0.1:$PORT can be bound (as gunicorn will)
  if ! .venv/bin/python - "$PORT" <<'PY'; then
import socket, sys
try:
    port = int(sys.argv[1])
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds
        sock.bind(("127.0.0.1", port))
except (ValueError, OverflowError, OSError):
    sys.exit(1)
PY
    echo "port $PORT on 127.0.0.1 is taken by another program (or is not a port number)." >&2
    echo "Stop that program, or run the portal on another port: PADDLECLOUD_PORT=<port> make run" >&2
    exit 1
  fi
}

# How gunicorn serves: portal/gunicorn_conf.py, the one config for make run, the image, the deploy and the
# tests (gevent workers: a slow or idle connection costs a greenlet, not a web thread; request limits).
GUNICORN_FLAGS=(--config python:portal.gunicorn_conf)

start_portal() {
  if ! is_running "$RUN_DIR/portal.pid"; then
    require_free_port
    # A fresh value per start: wait_for_portal accepts only the portal that answers with it.
    .venv/bin/python -c "import secrets; print(secrets.token_hex(16))" > "$RUN_DIR/portal.instance"
  fi
  PADDLECLOUD_INSTANCE=$(cat "$RUN_DIR/portal.instance" 2>/dev/null || true) \
    start_bg portal .venv/bin/gunicorn portal.wsgi --bind "127.0.0.1:$PORT" "${GUNICORN_FLAGS[@]}" \
    --access-logfile -
}

# Three workers, one per lane (core/lanes.py), so no lane waits behind another's backlog:
# `worker` starts and stops jobs and builds (queue `celery`); `control` runs beat and the loops that
# follow every job (`celery-control`: reconcile, storage quota, cleanup) and hears local jobs' process
# events; `side` verifies uploads, recounts usage and sends job-end notifications (`celery-side`,
# `celery-notify`), so a slow webhook receiver or a big upload never holds a job's slot.
start_worker() {
  mkdir -p "$VAR_DIR/celery"  # beat's schedule file lives here whatever the broker (Redis too)
  start_bg worker .venv/bin/celery -A portal worker -Q celery --concurrency 2 -l info -n "paddlecloud@%h"
  start_bg control .venv/bin/celery -A portal worker -B -s "$VAR_DIR/celery/beat-schedule" \
    -Q celery-control --pool threads --concurrency 2 -l info -n "control@%h"
  start_bg side .venv/bin/celery -A portal worker -Q celery-side,celery-notify --pool threads --concurrency 4 \
    -l info -n "side@%h"
}

wait_for_portal() {  # until OUR portal answers on 127.0.0.1:$PORT; anything else there stops the run
  local instance; instance=$(cat "$RUN_DIR/portal.instance" 2>/dev/null || true)
  if [ -z "$instance" ]; then
    echo "the running portal was started without an instance id; restart it: make stop && make run" >&2
    exit 1
  fi
  local answer
  for _ in $(seq 1 120); do
    answer=0
    .venv/bin/python - "http://127.0.0.1:$PORT/api/v1/version" "$instance" <<'PY' 2>/dev/null || answer=$?
import sys, urllib.error, urllib.request
try:
    response = urllib.request.urlopen(sys.argv[1], timeout=2)
except urllib.error.HTTPError as error:
    response = error  # an answer all the same: whose is it?
except OSError:
    sys.exit(2)  # nothing answers yet
sys.exit(0 if response.headers.get("X-PaddleCloud-Instance") == sys.argv[2] else 3)
PY
    case $answer in
      0) return 0 ;;
      3) echo "port $PORT on 127.0.0.1 answers, but not as the portal this run started: another program holds it." >&2
         echo "Stop that program, or run the portal on another port: PADDLECLOUD_PORT=<port> make run" >&2
         stop_bg portal >&2
         exit 1 ;;
    esac
    is_running "$RUN_DIR/portal.pid" || { echo "the portal exited; see $LOG_DIR/portal.log" >&2; tail -20 "$LOG_DIR/portal.log" >&2; exit 1; }
    sleep 0.5
  done
  echo "the portal did not answer on 127.0.0.1:$PORT within 60s; see $LOG_DIR/portal.log" >&2
  exit 1
}

stop_bg() {  # name: SIGTERM the group, SIGKILL after a grace period
  local pidfile=$RUN_DIR/$1.pid
  [ -f "$pidfile" ] || return 0
  local pid; pid=$(head -n1 "$pidfile")
  # Ours: the leader, or (its leader crashed) what is left of its group; a reused pid is someone else's.
  if ! is_running "$pidfile" && { started_at "$pid" >/dev/null || ! kill -0 -- "-$pid" 2>/dev/null; }; then
    rm -f "$pidfile"; return
  fi
  kill -TERM -- "-$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.25; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$pidfile"
  echo "$1 stopped"
}
