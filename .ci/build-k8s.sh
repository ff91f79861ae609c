#!/usr/bin/env bash
# What the tests under tests/k8s need, built by .ci/run in the background while the other tests run (niced: the
# tests come first), in three parts (tests/background_build.py: each test waits only for the part it needs):
#   control-plane  the test control plane with Kueue and JobSet (tools/k8s/build.sh --control-plane)
#   node           the real node, the test registry and the Kaniko builder (the rest of tools/k8s/build.sh, cached by
#                  version outside the repo)
#   images         the deploy tests' images (the portal from deploy/Dockerfile.portal, the PostgreSQL + Redis stand-in
#                  of tools/k8s/Dockerfile.services)
#
#   .ci/build-k8s.sh STATUS_FILE TIMES_FILE
#
# Each step appends "name start end" (epoch seconds) to TIMES_FILE; each part's exit status is written to
# STATUS_FILE.<part> when it ends, and the whole build's to STATUS_FILE last (atomically), also when a part failed:
# that is what tests/background_build.py waits for.
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
part_done() {  # part code: the part's status file, written atomically
  echo "$2" > "$status_file.$1.tmp" && mv "$status_file.$1.tmp" "$status_file.$1"
  return "$2"
}
{ step k8s-control-plane bash tools/k8s/build.sh --control-plane; part_done control-plane $?; } \
  && { step k8s-node bash tools/k8s/build.sh; part_done node $?; } \
  && { step images-portal python3 tools/k8s/images.py build-portal \
    && step images-services python3 tools/k8s/images.py build-services; part_done images $?; }
code=$?
echo "$code" > "$status_file.tmp" && mv "$status_file.tmp" "$status_file"
exit "$code"
