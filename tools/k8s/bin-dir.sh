#!/usr/bin/env bash
# Print the bin directory of the test control plane for the pinned versions (see build.sh).
set -euo pipefail
exec "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/build.sh" --print-bin-dir
