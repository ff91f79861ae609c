#!/usr/bin/env bash
# `make stop`: stop the portal and the workers that `make run` started.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
stop_bg notify
stop_bg worker
stop_bg portal
