#!/usr/bin/env bash
# What the tests under tests/k8s need, built by .ci/run in the background while the other tests run, in three parts
# (tests/background_build.py: each test waits only for the part it needs):
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
#
# The control plane and the node build at the tests' own priority, the images niced: on a cold machine the node's
# unit (about 13 min of pods on one worker, waiting on containers more than on the CPU) cannot start before its part
# is built, while the rest of the suite has slack. Niced (15) throughout, the build got only what the tests left idle:
# the node was built 37 min into a cold run, whose unit then ran alone to the end (50.5 min in all). At the tests'
# priority it gets a fair share: the node was built at 42 min on a slower evening (53.4 min in all; schemathesis and
# the browser tests ran slower beside it), so the two runs do not tell the settings apart (docs/development/testing.md).
# Since the suite's processes keep their bytecode they leave less idle time, which a niced build would wait for.
set -uo pipefail
cd "$(dirname "$0")/.."
status_file=$1 times_file=$2
step() {  # name niceness command...: one timed step; the first failure ends the build
  local start code
  start=$(date +%s)
  nice -n "$2" "${@:3}"; code=$?
  echo "$1 $start $(date +%s)" >> "$times_file"
  return "$code"
}
part_done() {  # part code: the part's status file, written atomically
  echo "$2" > "$status_file.$1.tmp" && mv "$status_file.$1.tmp" "$status_file.$1"
  return "$2"
}
{ step k8s-control-plane 0 bash tools/k8s/build.sh --control-plane; part_done control-plane $?; } \
  && { step k8s-node 0 bash tools/k8s/build.sh; part_done node $?; } \
  && { step images-portal 15 python3 tools/k8s/images.py build-portal \
    && step images-services 15 python3 tools/k8s/images.py build-services; part_done images $?; }
code=$?
echo "$code" > "$status_file.tmp" && mv "$status_file.tmp" "$status_file"
exit "$code"
