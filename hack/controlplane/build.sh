#!/usr/bin/env bash
# Build kube-apiserver and etcd from Go modules (never downloads a prebuilt binary).
#
# Output: $KCCM_CACHE_DIR/bin/<kubernetes>-<etcd>/{kube-apiserver,etcd}
#         (KCCM_CACHE_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/kccm)
# The result is reused while the pinned versions and these build inputs are unchanged; a lock
# keeps concurrent builds apart. Progress and elapsed time are printed while it runs.
#
# Usage: hack/controlplane/build.sh [--print-dir]
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

inputs_hash=$(cat "$here/versions.env" "$here/build.sh" "$here/kube-apiserver/main.go" \
  "$here/etcd/main.go" | sha256sum | cut -c1-16)
stamp="$bin_dir/.build-complete"

log() { printf '[controlplane-build %4ds] %s\n' "$SECONDS" "$*"; }

is_fresh() { [[ -x "$bin_dir/kube-apiserver" && -x "$bin_dir/etcd" && -f "$stamp" \
  && "$(cat "$stamp")" == "$inputs_hash" ]]; }

if is_fresh; then
  log "cached binaries are current: $bin_dir"
  exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/build.lock"
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
log "go: $(go version); kubernetes $KUBERNETES_VERSION, etcd $ETCD_VERSION"

# A heartbeat so long compile phases never sit silent.
phase_file=$(mktemp)
echo "starting" >"$phase_file"
start_epoch=$(date +%s)
( while sleep 30; do printf '[controlplane-build %4ds] ... still working: %s\n' \
    "$(( $(date +%s) - start_epoch ))" "$(cat "$phase_file" 2>/dev/null)"; done ) &
heartbeat=$!
work=$(mktemp -d "$cache_root/build.XXXXXX")
trap 'kill $heartbeat 2>/dev/null || true; rm -rf "$work" "$phase_file"' EXIT
phase() { echo "$*" >"$phase_file"; log "$*"; }

# ---- kube-apiserver -------------------------------------------------------------------
phase "downloading k8s.io/kubernetes@$KUBERNETES_VERSION metadata"
release_gomod=$(cd "$work" && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" \
  | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[[ -f "$release_gomod" ]] || { echo "error: could not download k8s.io/kubernetes@$KUBERNETES_VERSION go.mod" >&2; exit 1; }

staging_version="v0.${KUBERNETES_VERSION#v1.}"
# Every staging module is replaced by './staging/src/<module>' in the release's go.mod.
mapfile -t staging < <(sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/.*#\1#p' "$release_gomod")
[[ ${#staging[@]} -gt 10 ]] || { echo "error: found only ${#staging[@]} staging modules in $release_gomod" >&2; exit 1; }
godebug=$(grep -m1 '^godebug' "$release_gomod" || true)
go_line=$(grep -m1 '^go ' "$release_gomod")
log "derived ${#staging[@]} staging replacements at $staging_version from the release go.mod"

api="$work/kube-apiserver"
mkdir -p "$api"
cp "$here/kube-apiserver/main.go" "$api/"
{
  echo "module kccm.invalid/controlplane/kube-apiserver"
  echo
  echo "$go_line"
  [[ -n "$godebug" ]] && { echo; echo "$godebug"; }
  echo
  echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
  echo
  echo "replace ("
  for m in "${staging[@]}"; do echo "	$m => $m $staging_version"; done
  echo ")"
} >"$api/go.mod"

phase "resolving kube-apiserver modules (go mod tidy; first run downloads ~1 GB)"
(cd "$api" && go mod tidy)

minor=${KUBERNETES_VERSION#v1.}; minor=${minor%%.*}
build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done
phase "compiling kube-apiserver (cold: 10-20 min on 2 cores)"
(cd "$api" && go build -trimpath -ldflags "$ldflags" -o "$work/out/kube-apiserver" .)

# ---- etcd (separate module so it cannot bump the apiserver's etcd client) -------------
etcd="$work/etcd"
mkdir -p "$etcd"
cp "$here/etcd/main.go" "$etcd/"
printf 'module kccm.invalid/controlplane/etcd\n\n%s\n\nrequire go.etcd.io/etcd/server/v3 %s\n' \
  "$go_line" "$ETCD_VERSION" >"$etcd/go.mod"
phase "resolving etcd modules"
(cd "$etcd" && go mod tidy)
phase "compiling etcd"
(cd "$etcd" && go build -trimpath -ldflags "-s -w" -o "$work/out/etcd" .)

phase "verifying versions"
"$work/out/kube-apiserver" --version
"$work/out/etcd" --version | head -1

mkdir -p "$bin_dir"
mv -f "$work/out/kube-apiserver" "$work/out/etcd" "$bin_dir/"
echo "$inputs_hash" >"$stamp"
log "done: $bin_dir"
