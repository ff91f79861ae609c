#!/usr/bin/env bash
# Run the whole pytest suite; "no tests collected" (exit 5) is a failure, never a pass.
set -uo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pytest "$@"
status=$?
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: treating as a failure" >&2
  exit 1
fi
exit "$status"
