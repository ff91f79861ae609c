# shellcheck shell=bash
# Sourced by tools/k8s/build*.sh, after each sets `here` (its own directory): the steps every build of
# binaries from published Go modules into a version-keyed cache shares. Not run on its own.

# pin_versions NAME...: read versions.env; a NAME already set in the environment wins over the file
# (lets one try another version without editing it).
pin_versions() {
  local name
  local -A wanted=()
  for name in "$@"; do wanted[$name]="${!name:-}"; done
  # shellcheck source=versions.env
  source "$here/versions.env"
  for name in "$@"; do
    if [[ -n "${wanted[$name]}" ]]; then printf -v "$name" '%s' "${wanted[$name]}"; fi
  done
}

# use_cache KEY BINARY...: the cache directory of KEY ($out, its $bin) and the binaries it must hold.
use_cache() {
  cache_root="${PADDLECLOUD_K8S_CACHE:-$HOME/.cache/paddlecloud/k8s}"
  key="$1"
  out="$cache_root/$key"
  bin="$out/bin"
  binaries=("${@:2}")
}

# print_bin_dir_if_asked "$@": `--print-bin-dir` prints $bin and ends the script.
print_bin_dir_if_asked() {
  if [[ "${1:-}" == "--print-bin-dir" ]]; then
    echo "$bin"
    exit 0
  fi
}

# complete: the cache holds a finished build (its stamp and every binary).
complete() {
  [[ -f "$out/.complete" ]] || return 1
  local b
  for b in "${binaries[@]}"; do [[ -x "$bin/$b" ]] || return 1; done
}

# find_go: $GO, else go on PATH, else /usr/local/go/bin/go; static binaries, and never let a dependency's
# `toolchain` line download another Go behind our back. The compiler writes no DWARF: every binary is linked with
# `-s -w`, which drops it anyway, and not making it cut the compile's CPU time by 7-13% (client-go's 555 packages,
# cold: 179 s against 192-206 s), most of what a cold CI spends here.
find_go() {
  if [[ -z "${GO:-}" ]]; then
    if command -v go >/dev/null 2>&1; then GO="$(command -v go)"; else GO=/usr/local/go/bin/go; fi
  fi
  export CGO_ENABLED=0 GOTOOLCHAIN=local
  [[ " ${GOFLAGS:-} " == *" -gcflags=all=-dwarf=false "* ]] || export GOFLAGS="${GOFLAGS:+$GOFLAGS }-gcflags=all=-dwarf=false"
}

# start_build [SUBDIR...]: start the clock, make $bin and $src (and its SUBDIRs), drop the old stamp.
start_build() {
  start=$(date +%s)
  src="$out/src"
  local dirs=("$src") d
  for d in "$@"; do dirs+=("$src/$d"); done
  mkdir -p "$bin" "${dirs[@]}"
  rm -f "$out/.complete"
  echo "building $key with $("$GO" version) into $bin"
}

# go_mod_of MODULE@VERSION: the path of that module's go.mod in the module cache (downloaded if needed).
go_mod_of() {
  "$GO" mod download -json "$1" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p'
}

# Committed go.sum files seed each wrapper so checksums are pinned in the repo; `go mod tidy`
# still verifies anything new against GOSUMDB as configured on the machine.
seed_sum() {  # <wrapper dir> <committed sum file>
  if [[ -f "$2" ]]; then cp "$2" "$1/go.sum"; else : > "$1/go.sum"; fi
}
save_sum() {  # <wrapper dir> <committed sum file>
  if ! cmp -s "$1/go.sum" "$2"; then
    mkdir -p "$(dirname "$2")"
    cp "$1/go.sum" "$2"
    echo "note: updated ${2#"$here"/} (commit it)"
  fi
}
# tidy_pinned <wrapper dir> <committed sum file> [reference wrapper dir]: `go mod tidy` the wrapper module against the
# pinned go.sum; with a reference, its graph is then pinned to the reference's versions (pin_to) before the sum is saved.
tidy_pinned() {
  seed_sum "$1" "$2"
  (cd "$1" && "$GO" mod tidy)
  if [[ -n "${3:-}" ]]; then pin_to "$1" "$3"; fi
  save_sum "$1" "$2"
}

# shared_versions <wrapper dir> <reference wrapper dir>: "path version reference-version" for every module both graphs
# hold (the reference's version after its own `replace` lines), sorted by path.
shared_versions() {
  LC_ALL=C join \
    <(cd "$1" && "$GO" list -m -f '{{if not .Main}}{{.Path}} {{.Version}}{{end}}' all | LC_ALL=C sort) \
    <(cd "$2" && "$GO" list -m -f '{{if not .Main}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}' all \
      | LC_ALL=C sort)
}

# pin_to <wrapper dir> <reference wrapper dir>: a `replace` line for every module the wrapper's graph shares with the
# reference's, at the reference's version (older or newer), then `go mod tidy`. The build cache then holds one compiled
# copy of what both use: kwok pinned to the control plane's graph compiled in 115 CPU-s after it, 283 CPU-s on its own
# graph (41 of its 170 shared modules a patch or minor apart, k8s.io v0.36.1 against v0.36.3; 2026-11-30).
pin_to() {
  local edits=()
  mapfile -t edits < <(shared_versions "$1" "$2" | awk '$2 != $3 { print "-replace=" $1 "=" $1 "@" $3 }')
  if ((${#edits[@]})); then (cd "$1" && "$GO" mod edit "${edits[@]}" && "$GO" mod tidy); fi
}

# control_plane_src: the control plane's wrapper module (build.sh owns its cache key), which the node's other modules
# are pinned to; fails with a message when the control plane is not built yet (call it in an assignment, for set -e).
control_plane_src() {
  local dir
  dir="$(dirname "$(bash "$here/build.sh" --print-bin-dir)")/src/kube"
  [[ -f "$dir/go.mod" ]] || { echo "build the control plane first (tools/k8s/build.sh): no $dir/go.mod" >&2; exit 1; }
  echo "$dir"
}

# require_binaries: end the script unless the build made every binary.
require_binaries() {
  local b
  for b in "${binaries[@]}"; do [[ -x "$bin/$b" ]] || { echo "missing $bin/$b" >&2; exit 1; }; done
}

# finish_build WHAT: write the stamp, say how long it took and where WHAT is.
finish_build() {
  elapsed=$(( $(date +%s) - start ))
  echo "$key built $(date -u +%FT%TZ) in ${elapsed}s with $("$GO" version)" > "$out/.complete"
  echo "build of $key took ${elapsed}s ($((elapsed / 60))m$((elapsed % 60))s); $1 in $bin"
}
