#!/usr/bin/env bash
# The original PaddlePaddle/cloud tools/build_docker.sh, now a front for `paddlectl build` (same four
# arguments; any paddlectl build flag may follow them, e.g. --push). See `paddlectl build --help`.
set -euo pipefail

usage() {  # builtins only: it also runs where PATH is bare
  local lines=(
    "usage: tools/build_docker.sh <src_trainer_package> <dest_trainer_package> <base image> <runtime image>"
    "         [--push] [--context DIR] [--builder buildah|podman|docker] [--base-user USER]"
    ""
    "Copies the trainer package folder into the image at <dest_trainer_package> (an absolute path),"
    "installs its requirements.txt (if any) with pip on top of <base image>, and tags <runtime image>."
    "Builds with buildah, podman or docker, whichever works here; with none, prints the commands to run"
    "elsewhere and where the build context is. It runs \`paddlectl build\` (see paddlectl build --help)."
    ""
    "example: tools/build_docker.sh ./examples/fit_a_line /workspace \\"
    "           registry.example.com/paddlecloud/paddle:3.0.0 registry.example.com/alice/fit:1 --push"
  )
  printf '%s\n' "${lines[@]}"
}

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
esac
if [ $# -lt 4 ]; then
  usage >&2
  exit 2
fi

repo=$(cd "${BASH_SOURCE[0]%/*}/.." && pwd)
if [ -x "$repo/.venv/bin/paddlectl" ]; then
  paddlectl="$repo/.venv/bin/paddlectl"
elif paddlectl=$(command -v paddlectl); then
  :
else
  echo "error: paddlectl not found: run 'make install' in $repo, or 'pip install ./client'" >&2
  exit 2
fi
exec "$paddlectl" build "$@"
