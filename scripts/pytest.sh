#!/usr/bin/env bash
# Run the whole pytest suite; "no tests collected" (exit 5) is a failure, never a pass.
set -uo pipefail
cd "$(dirname "$0")/.."
# On CI the 30 slowest tests close the log, so the next slow one is found where it appears.
durations=()
if [ "${CI:-}" = "true" ]; then durations=(--durations=30); fi
# In parallel (pytest-xdist): one worker per core unless PADDLECLOUD_TEST_WORKERS says (0: one process). Each worker
# is a test run of its own (database, cache, Celery queue: tests/settings.py); the tests under tests/k8s share one
# worker (one control plane and real node per host) and start first, or, while CI still builds what they need, as soon
# as their part of the build is done (tests/k8s/conftest.py, tests/conftest.py).
# --no-loadscope-reorder keeps the collection's order, which places the k8s tests (pytest-xdist would put its
# largest unit first).
workers=(-n "${PADDLECLOUD_TEST_WORKERS:-auto}" --dist loadgroup --no-loadscope-reorder)
.venv/bin/python -m pytest "${workers[@]}" ${durations[@]+"${durations[@]}"} "$@"  # the empty array's form for bash < 4.4
status=$?
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: treating as a failure" >&2
  exit 1
fi
exit "$status"
