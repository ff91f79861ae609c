#!/usr/bin/env bash
# What the tests under tests/k8s need, built by .ci/run in the background while the other tests run, in three parts
# (tests/background_build.py: each test waits only for the part it needs):
#   control-plane  the test control plane with Kueue and JobSet (tools/k8s/build.sh --control-plane)
#   node           the real node with its runtime image, and the test registry (tools/k8s/build.sh --node, cached by
#                  version outside the repo)
#   images         the in-cluster image builder (Kaniko: the rest of tools/k8s/build.sh) and the deploy tests' images
#                  (the portal from deploy/Dockerfile.portal, the PostgreSQL + Redis stand-in of
#                  tools/k8s/Dockerfile.services). Their tests run last in the node's unit, so the unit starts as soon
#                  as the node is built, about 3 min before Kaniko would be (190 s of the cold node part's 924 s).
#
#   .ci/build-k8s.sh STATUS_FILE TIMES_FILE
#
# Each step appends "name start end" (epoch seconds) to TIMES_FILE; each part's exit status is written to
# STATUS_FILE.<part> when it ends, and the whole build's to STATUS_FILE last (atomically), also when a part failed:
# that is what tests/background_build.py waits for.
#
# Priority: on a cold machine the node's unit (about 12 min of pods on one worker, waiting on containers more than on
# the CPU) cannot start before its part is built, while the rest of the suite has slack; so the Go builds get three
# times the CPU share of each of the tests' sessions (niceness -5), the images an equal one. The kernel shares the CPU
# between sessions first (autogroups, /proc/sys/kernel/sched_autogroup_enabled, on here), and .ci/run starts this
# build in a session of its own, as the tests start their Celery workers and jobs: a process's `nice` then only
# weighs it against its own session's processes, so each step also sets the session's (/proc/self/autogroup). Until
# 2026-11-30 only `nice` was set: the build's niceness 15 and 0 in two cold runs (50.5 and 53.4 min) were the same
# share, the tests'. Set on the session, the node was built 18 min into a cold run instead of 42 (42.2 min in all).
set -uo pipefail
cd "$(dirname "$0")/.."
status_file=$1 times_file=$2
step() {  # name niceness command...: one timed step; the first failure ends the build
  local start code
  start=$(date +%s)
  { echo "$2" > /proc/self/autogroup; } 2>/dev/null  # the session's share (root only for a negative one)
  nice -n "$2" "${@:3}"; code=$?
  echo "$1 $start $(date +%s)" >> "$times_file"
  return "$code"
}
part_done() {  # part code: the part's status file, written atomically
  echo "$2" > "$status_file.$1.tmp" && mv "$status_file.$1.tmp" "$status_file.$1"
  return "$2"
}
{ step k8s-control-plane -5 bash tools/k8s/build.sh --control-plane; part_done control-plane $?; } \
  && { step k8s-node -5 bash tools/k8s/build.sh --node; part_done node $?; } \
  && { step images-builder -5 bash tools/k8s/build.sh \
    && step images-portal 0 python3 tools/k8s/images.py build-portal \
    && step images-services 0 python3 tools/k8s/images.py build-services; part_done images $?; }
code=$?
echo "$code" > "$status_file.tmp" && mv "$status_file.tmp" "$status_file"
exit "$code"
