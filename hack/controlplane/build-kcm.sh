#!/usr/bin/env bash
# Build kube-controller-manager and kubectl from Go modules (never downloads a prebuilt binary).
#
# Output: $KCCM_CACHE_DIR/bin/<kubernetes>-<etcd>/{kube-controller-manager,kubectl}
#         (the directory build.sh fills with etcd and kube-apiserver; kccm.testing.controlplane
#         finds all four there, or in $KCCM_CONTROL_PLANE_BIN)
#
# A separate script with its own stamp (.kcm-build-complete), so that adding these two never
# invalidates or rebuilds the etcd + kube-apiserver cache. Both come from the k8s.io/kubernetes
# module build.sh already downloaded, and build.sh's lock serialises the two builds, so this one
# compiles after the apiserver with Go's build cache warm (client-go, apimachinery, ... are
# shared): only the packages of the two commands themselves are new. Upstream's own main
# packages are built (go.mod `tool` lines, Go >= 1.24), so no wrapper main.go is needed.
#
# Usage: hack/controlplane/build-kcm.sh [--print-dir]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache_root=${KCCM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kccm}
bin_dir="$cache_root/bin/${KUBERNETES_VERSION}-${ETCD_VERSION}"
if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$bin_dir"
  exit 0
fi

commands=(kube-controller-manager kubectl)
inputs_hash=$(cat "$here/versions.env" "$here/build-kcm.sh" | sha256sum | cut -c1-16)
stamp="$bin_dir/.kcm-build-complete"

log() { printf '[kcm-build %4ds] %s\n' "$SECONDS" "$*"; }

is_fresh() {
  local c
  for c in "${commands[@]}"; do [[ -x "$bin_dir/$c" ]] || return 1; done
  [[ -f "$stamp" && "$(cat "$stamp")" == "$inputs_hash" ]]
}

if is_fresh; then
  log "cached binaries are current: $bin_dir/{$(IFS=,; echo "${commands[*]}")}"
  exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/build.lock"  # build.sh's lock: one Go build at a time, sharing its cache
if ! flock -n 9; then
  log "another build holds $cache_root/build.lock; waiting for it"
  flock 9
fi
if is_fresh; then
  log "another build finished the binaries: $bin_dir"
  exit 0
fi

command -v go >/dev/null || { echo "error: the Go toolchain (go) is not on PATH" >&2; exit 1; }
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
log "go: $(go version); kubernetes $KUBERNETES_VERSION: ${commands[*]}"

# A heartbeat so long compile phases never sit silent.
phase_file=$(mktemp)
echo "starting" >"$phase_file"
start_epoch=$(date +%s)
( while sleep 30; do printf '[kcm-build %4ds] ... still working: %s\n' \
    "$(( $(date +%s) - start_epoch ))" "$(cat "$phase_file" 2>/dev/null)"; done ) &
heartbeat=$!
work=$(mktemp -d "$cache_root/kcm-build.XXXXXX")
trap 'kill $heartbeat 2>/dev/null || true; rm -rf "$work" "$phase_file"' EXIT
phase() { echo "$*" >"$phase_file"; log "$*"; }

phase "locating k8s.io/kubernetes@$KUBERNETES_VERSION (downloaded by build.sh)"
release_gomod=$(cd "$work" && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" \
  | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[[ -f "$release_gomod" ]] || { echo "error: could not download k8s.io/kubernetes@$KUBERNETES_VERSION go.mod" >&2; exit 1; }

# The same module graph as build.sh's kube-apiserver module (same requirement, same staging
# replacements), so Go's build cache serves every package the two share.
staging_version="v0.${KUBERNETES_VERSION#v1.}"
mapfile -t staging < <(sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/.*#\1#p' "$release_gomod")
[[ ${#staging[@]} -gt 10 ]] || { echo "error: found only ${#staging[@]} staging modules in $release_gomod" >&2; exit 1; }
godebug=$(grep -m1 '^godebug' "$release_gomod" || true)
go_line=$(grep -m1 '^go ' "$release_gomod")

module="$work/module"
mkdir -p "$module"
{
  echo "module kccm.invalid/controlplane/kcm"
  echo
  echo "$go_line"
  [[ -n "$godebug" ]] && { echo; echo "$godebug"; }
  echo
  echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
  echo
  for c in "${commands[@]}"; do echo "tool k8s.io/kubernetes/cmd/$c"; done
  echo
  echo "replace ("
  for m in "${staging[@]}"; do echo "	$m => $m $staging_version"; done
  echo ")"
} >"$module/go.mod"

phase "resolving modules (go mod tidy; already in the module cache after build.sh)"
(cd "$module" && go mod tidy)

minor=${KUBERNETES_VERSION#v1.}; minor=${minor%%.*}
build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done
packages=()
for c in "${commands[@]}"; do packages+=("k8s.io/kubernetes/cmd/$c"); done
phase "compiling ${commands[*]} (after build.sh: a few minutes on 2 cores)"
mkdir -p "$work/out"
(cd "$module" && go build -trimpath -ldflags "$ldflags" -o "$work/out/" "${packages[@]}")

phase "verifying versions"
"$work/out/kube-controller-manager" --version
"$work/out/kubectl" version --client 2>/dev/null | head -1

mkdir -p "$bin_dir"
for c in "${commands[@]}"; do mv -f "$work/out/$c" "$bin_dir/"; done
echo "$inputs_hash" >"$stamp"
log "done: $bin_dir/{$(IFS=,; echo "${commands[*]}")}"
