#!/usr/bin/env bash
# Run the whole pytest suite; "no tests collected" (exit 5) is a failure, never a pass.
set -uo pipefail
cd "$(dirname "$0")/.."
# On CI the 30 slowest tests close the log, so the next slow one is found where it appears.
durations=()
if [ "${CI:-}" = "true" ]; then durations=(--durations=30); fi
.venv/bin/python -m pytest ${durations[@]+"${durations[@]}"} "$@"  # the empty array's form for bash < 4.4
status=$?
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: treating as a failure" >&2
  exit 1
fi
exit "$status"
