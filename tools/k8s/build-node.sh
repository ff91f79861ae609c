#!/usr/bin/env bash
# Build the real test node from published Go modules into a version-keyed cache outside the repo:
# kubelet (same k8s.io/kubernetes wrapper as the control plane), containerd 2.x + its runc shim + ctr, runc,
# CoreDNS (only the plugins cluster DNS needs) and a static pause binary; install Debian's CNI
# plugins if missing (root); then build the runtime and pause images (tools/k8s/images.py, root).
# The node's NetworkPolicy enforcer (kube-router's policy controller) comes from build-netpol.sh, called here.
#
#   tools/k8s/build-node.sh                  build (no-op in ~1s when the cache is complete)
#   tools/k8s/build-node.sh --print-bin-dir  print the node's bin directory and exit
#
# Called by build.sh after the control plane (the kubelet wrapper reuses its generated go.mod).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
_k8s="${K8S_VERSION:-}"; _etcd="${ETCD_VERSION:-}"; _kwok="${KWOK_VERSION:-}"
_ctd="${CONTAINERD_VERSION:-}"; _dns="${COREDNS_VERSION:-}"; _runc="${RUNC_VERSION:-}"
# shellcheck source=versions.env
source "$here/versions.env"
K8S_VERSION="${_k8s:-$K8S_VERSION}"; ETCD_VERSION="${_etcd:-$ETCD_VERSION}"; KWOK_VERSION="${_kwok:-$KWOK_VERSION}"
CONTAINERD_VERSION="${_ctd:-$CONTAINERD_VERSION}"; COREDNS_VERSION="${_dns:-$COREDNS_VERSION}"
RUNC_VERSION="${_runc:-$RUNC_VERSION}"

cache_root="${PADDLECLOUD_K8S_CACHE:-$HOME/.cache/paddlecloud/k8s}"
key="node-${K8S_VERSION}-containerd${CONTAINERD_VERSION#v}-runc${RUNC_VERSION#v}-coredns${COREDNS_VERSION#v}"
out="$cache_root/$key"
bin="$out/bin"
binaries=(kubelet containerd containerd-shim-runc-v2 ctr runc coredns pause)

if [[ "${1:-}" == "--print-bin-dir" ]]; then
  echo "$bin"
  exit 0
fi

images() {
  if [[ "$(id -u)" != 0 ]]; then
    echo "node images need root (chroot, mounts): skipped; run tools/k8s/build-node.sh as root"
    return 0
  fi
  python3 "$here/images.py" build
}

debian_packages() {
  # The CNI plugins come from Debian; runc is built (Debian's 1.1.5 fails under containerd 2.x, see README).
  local need=()
  command -v gcc >/dev/null || need+=(gcc libc6-dev)  # runc's nsenter is C (cgo)
  [[ -f /usr/include/seccomp.h ]] || need+=(libseccomp-dev pkg-config)  # CRI asks runc for seccomp
  [[ -x /usr/lib/cni/bridge ]] || need+=(containernetworking-plugins)
  command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
  command -v ip >/dev/null || need+=(iproute2)  # the node's bridge
  command -v iptables >/dev/null || need+=(iptables)  # kube-router's policy rules (build-netpol.sh)
  command -v ipset >/dev/null || need+=(ipset)  # ... and its address sets
  if [[ ${#need[@]} -gt 0 ]]; then
    if [[ "$(id -u)" != 0 ]]; then echo "missing Debian packages (need root to install): ${need[*]}" >&2; return 0; fi
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
}

complete() {
  [[ -f "$out/.complete" ]] || return 1
  local b
  for b in "${binaries[@]}"; do [[ -x "$bin/$b" ]] || return 1; done
}

debian_packages
# The NetworkPolicy enforcer has a cache directory (and key) of its own: adding it rebuilt nothing else.
bash "$here/build-netpol.sh"
if complete; then
  echo "k8s test node $key is already built in $bin"
  images
  exit 0
fi

cp_key="${K8S_VERSION}-etcd${ETCD_VERSION#v}-kwok${KWOK_VERSION#v}"
cp_mod="$cache_root/$cp_key/src/kube/go.mod"
[[ -f "$cp_mod" ]] || { echo "build the control plane first (tools/k8s/build.sh): no $cp_mod" >&2; exit 1; }

if [[ -z "${GO:-}" ]]; then
  if command -v go >/dev/null 2>&1; then GO="$(command -v go)"; else GO=/usr/local/go/bin/go; fi
fi
export CGO_ENABLED=0 GOTOOLCHAIN=local

start=$(date +%s)
src="$out/src"
mkdir -p "$bin" "$src/kubelet" "$src/containerd" "$src/coredns" "$src/pause"
rm -f "$out/.complete"
echo "building $key with $("$GO" version) into $bin"

seed_sum() { if [[ -f "$2" ]]; then cp "$2" "$1/go.sum"; else : > "$1/go.sum"; fi; }
save_sum() {
  if ! cmp -s "$1/go.sum" "$2"; then cp "$1/go.sum" "$2"; echo "note: updated ${2#"$here"/} (commit it)"; fi
}
go_line="$(grep -m1 '^go ' "$cp_mod")"

# ---- kubelet: the control plane's generated wrapper (same replaces) with kubelet as the only tool ----
sed '/^tool (/,/^)/d' "$cp_mod" | sed 's#^module .*#module paddlecloud.local/k8s-build/kubelet#' > "$src/kubelet/go.mod"
printf 'tool k8s.io/kubernetes/cmd/kubelet\n' >> "$src/kubelet/go.mod"
seed_sum "$src/kubelet" "$here/gosum/kubelet-$K8S_VERSION.sum"
(cd "$src/kubelet" && "$GO" mod tidy)
save_sum "$src/kubelet" "$here/gosum/kubelet-$K8S_VERSION.sum"
minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
echo "go build kubelet $K8S_VERSION"
(cd "$src/kubelet" && "$GO" build -trimpath -ldflags "-s -w $ldflags" -o "$bin/kubelet" k8s.io/kubernetes/cmd/kubelet)

# ---- containerd 2.x, its runc shim and ctr (static: the btrfs snapshotter needs cgo and is left out) ----
cat > "$src/containerd/go.mod" <<MOD
// Generated by tools/k8s/build-node.sh; do not edit.
module paddlecloud.local/k8s-build/containerd

go $(grep -m1 '^go ' "$("$GO" mod download -json "github.com/containerd/containerd/v2@$CONTAINERD_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')" | cut -d' ' -f2)

require github.com/containerd/containerd/v2 $CONTAINERD_VERSION

tool (
	github.com/containerd/containerd/v2/cmd/containerd
	github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
	github.com/containerd/containerd/v2/cmd/ctr
)
MOD
seed_sum "$src/containerd" "$here/gosum/containerd-$CONTAINERD_VERSION.sum"
(cd "$src/containerd" && "$GO" mod tidy)
save_sum "$src/containerd" "$here/gosum/containerd-$CONTAINERD_VERSION.sum"
echo "go build containerd $CONTAINERD_VERSION"
(cd "$src/containerd" && "$GO" build -trimpath -tags no_btrfs \
  -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" -o "$bin/" \
  github.com/containerd/containerd/v2/cmd/containerd \
  github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
  github.com/containerd/containerd/v2/cmd/ctr)

# ---- runc (cgo: its nsenter is C, and seccomp links Debian's libseccomp; CRI sandboxes use seccomp) ----
mkdir -p "$src/runc"
cat > "$src/runc/go.mod" <<MOD
// Generated by tools/k8s/build-node.sh; do not edit.
module paddlecloud.local/k8s-build/runc

$go_line

require github.com/opencontainers/runc $RUNC_VERSION

tool github.com/opencontainers/runc
MOD
seed_sum "$src/runc" "$here/gosum/runc-$RUNC_VERSION.sum"
(cd "$src/runc" && "$GO" mod tidy)
save_sum "$src/runc" "$here/gosum/runc-$RUNC_VERSION.sum"
echo "go build runc $RUNC_VERSION"
(cd "$src/runc" && CGO_ENABLED=1 "$GO" build -trimpath -tags seccomp -ldflags "-s -w" -o "$bin/runc" github.com/opencontainers/runc)

# ---- CoreDNS with only the plugins our Corefile uses (the full set pulls every cloud SDK) ----
dns_mod="$("$GO" mod download -json "github.com/coredns/coredns@$COREDNS_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
cat > "$src/coredns/go.mod" <<MOD
// Generated by tools/k8s/build-node.sh; do not edit.
module paddlecloud.local/k8s-build/coredns

$(grep -m1 '^go ' "$dns_mod")

require github.com/coredns/coredns $COREDNS_VERSION
MOD
cat > "$src/coredns/main.go" <<'GO'
// Generated by tools/k8s/build-node.sh: CoreDNS with the plugins tools/k8s/node.py's Corefile uses.
package main

import (
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() { coremain.Run() }
GO
seed_sum "$src/coredns" "$here/gosum/coredns-$COREDNS_VERSION.sum"
(cd "$src/coredns" && "$GO" mod tidy)
save_sum "$src/coredns" "$here/gosum/coredns-$COREDNS_VERSION.sum"
echo "go build coredns $COREDNS_VERSION"
(cd "$src/coredns" && "$GO" build -trimpath -ldflags "-s -w" -o "$bin/coredns" .)

# ---- pause: the sandbox container's process; waits for a signal and exits ----
cat > "$src/pause/go.mod" <<MOD
module paddlecloud.local/k8s-build/pause

$go_line
MOD
cat > "$src/pause/main.go" <<'GO'
// Generated by tools/k8s/build-node.sh: the pod sandbox's process (holds the namespaces until killed).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
GO
(cd "$src/pause" && "$GO" build -trimpath -ldflags "-s -w" -o "$bin/pause" .)

for b in "${binaries[@]}"; do [[ -x "$bin/$b" ]] || { echo "missing $bin/$b" >&2; exit 1; }; done
"$bin/kubelet" --version
"$bin/containerd" --version
# Not `| head -1`: under pipefail the writer dies of SIGPIPE (exit 141) when it prints more than head reads.
coredns_version=$("$bin/coredns" -version)
printf '%s\n' "${coredns_version%%$'\n'*}"
elapsed=$(( $(date +%s) - start ))
echo "$key built $(date -u +%FT%TZ) in ${elapsed}s with $("$GO" version)" > "$out/.complete"
echo "build of $key took ${elapsed}s ($((elapsed / 60))m$((elapsed % 60))s); binaries in $bin"
images
