#!/usr/bin/env bash
# The end of `make run`: submit examples/fit_a_line (2 pservers + 2 trainers, real PaddlePaddle)
# through the running portal with paddlectl, wait for it, and show how it went. Exits non-zero
# unless the job succeeded. The demo's paddlectl config lives in var/, not in ~/.paddle.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

export PADDLE_CONFIG="$VAR_DIR/paddle/config" PADDLE_TOKEN_CACHE="$VAR_DIR/paddle/token_cache"
paddlectl=.venv/bin/paddlectl
job=fit-a-line

.venv/bin/python -c "import json,sys; print(json.load(open(sys.argv[1]))['password'])" "$VAR_DIR/demo-credentials.json" \
  | $paddlectl config init --endpoint "$PORTAL_URL" --username demo --password-stdin --datacenter local >/dev/null

# A run of an earlier `make run` that was interrupted may still hold the name.
$paddlectl kill "$job" >/dev/null 2>&1 || true

echo
echo "Submitting $job (2 pservers + 2 trainers). The first job installs PaddlePaddle 3.0.0 into the"
echo "cached job environment (~20 s); later jobs start at once."
# Half a core each: the four processes fit a 2-core laptop's capacity (the scheduler never oversubscribes).
$paddlectl submit -jobname "$job" -pservers 2 -parallelism 2 -cpu 0.5 -pscpu 0.5 -memory 1Gi -psmemory 1Gi -passes 8 \
  -entry "python train.py" examples/fit_a_line
uid=$($paddlectl get jobs -o json | .venv/bin/python -c "import json,sys; print(json.load(sys.stdin)[0]['uid'])")
echo "Watch it: $PORTAL_URL/jobs/$uid/   (or: PADDLE_CONFIG=$PADDLE_CONFIG $paddlectl logs -f $job)"
echo

status=0
$paddlectl wait --timeout 900 "$job" || status=$?

for trainer in 0 1; do
  echo
  echo "--- trainer-$trainer: first and last loss lines ---"
  $paddlectl logs -w "trainer-$trainer" "$job" | grep -E "loss" | sed -n '1p;$p' || true
done
echo
$paddlectl get workers "$job"
echo
# Not `| head`: under pipefail a longer list would kill paddlectl with SIGPIPE and fail the run.
jobs_table=$($paddlectl get jobs)
printf '%s\n' "$jobs_table" | sed -n '1,2p'
echo
echo "Job page: $PORTAL_URL/jobs/$uid/"
echo "Portal:   $PORTAL_URL/ (log in as demo; password in $VAR_DIR/demo-credentials.json)"
echo "paddlectl: export PADDLE_CONFIG=$PADDLE_CONFIG PADDLE_TOKEN_CACHE=$PADDLE_TOKEN_CACHE"
echo "Stop the portal and workers with: make stop"
exit "$status"
