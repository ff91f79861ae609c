#!/usr/bin/env bash
# What the tests under tests/k8s need, built by .ci/run in the background while the other tests run (niced: the
# tests come first): the test control plane, the real node, Kueue and JobSet, the test registry and the Kaniko
# builder (tools/k8s/build.sh, cached by version outside the repo), then the deploy tests' images (the portal from
# deploy/Dockerfile.portal, the PostgreSQL + Redis stand-in of tools/k8s/Dockerfile.services).
#
#   .ci/build-k8s.sh STATUS_FILE TIMES_FILE
#
# Each step appends "name start end" (epoch seconds) to TIMES_FILE; the exit status is written to STATUS_FILE
# last (atomically), which is what tests/k8s/conftest.py waits for.
set -uo pipefail
cd "$(dirname "$0")/.."
status_file=$1 times_file=$2
step() {  # name command...: one timed step; the first failure ends the build
  local start code
  start=$(date +%s)
  nice -n 15 "${@:2}"; code=$?
  echo "$1 $start $(date +%s)" >> "$times_file"
  return "$code"
}
step k8s-build bash tools/k8s/build.sh \
  && step images-portal python3 tools/k8s/images.py build-portal \
  && step images-services python3 tools/k8s/images.py build-services
code=$?
echo "$code" > "$status_file.tmp" && mv "$status_file.tmp" "$status_file"
exit "$code"
