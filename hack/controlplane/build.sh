#!/usr/bin/env bash
# Build kube-apiserver and etcd from Go modules (never downloads a prebuilt binary).
#
# Output: $KCCM_CACHE_DIR/bin/<kubernetes>-<etcd>/{kube-apiserver,etcd}
#         (KCCM_CACHE_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/kccm)
# The result is reused while the pinned versions and these build inputs are unchanged; a lock
# keeps concurrent builds apart. Progress and elapsed time are printed while it runs
# (hack/lib.sh).
#
# Usage: hack/controlplane/build.sh [--print-dir | --print-hash]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=../lib.sh
source "$here/../lib.sh"
# shellcheck source=kubernetes.sh
source "$here/kubernetes.sh"

build_init controlplane "${KUBERNETES_VERSION}-${ETCD_VERSION}" kube-apiserver etcd -- \
  "$here/versions.env" "$here/build.sh" "$here/kubernetes.sh" "$here/kube-apiserver/main.go" \
  "$here/etcd/main.go" -- "$@"
build_lock build.lock
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
log "go: $(go version); kubernetes $KUBERNETES_VERSION, etcd $ETCD_VERSION"
build_workdir build

# ---- kube-apiserver -------------------------------------------------------------------
phase "downloading k8s.io/kubernetes@$KUBERNETES_VERSION metadata"
release_gomod=$(go_mod_file k8s.io/kubernetes "$KUBERNETES_VERSION")
api="$work/kube-apiserver"
mkdir -p "$api"
cp "$here/kube-apiserver/main.go" "$api/"
k8s_go_mod kccm.invalid/controlplane/kube-apiserver "$release_gomod" >"$api/go.mod"

phase "resolving kube-apiserver modules (go mod tidy; first run downloads ~1 GB)"
(cd "$api" && go mod tidy)
phase "compiling kube-apiserver (cold: 10-20 min on 2 cores)"
(cd "$api" && go build -trimpath -ldflags "$(k8s_ldflags)" -o "$work/out/kube-apiserver" .)

# ---- etcd (separate module so it cannot bump the apiserver's etcd client) -------------
etcd="$work/etcd"
mkdir -p "$etcd"
cp "$here/etcd/main.go" "$etcd/"
printf 'module kccm.invalid/controlplane/etcd\n\n%s\n\nrequire go.etcd.io/etcd/server/v3 %s\n' \
  "$(k8s_go_line "$release_gomod")" "$ETCD_VERSION" >"$etcd/go.mod"
phase "resolving etcd modules"
(cd "$etcd" && go mod tidy)
phase "compiling etcd"
(cd "$etcd" && go build -trimpath -ldflags "-s -w" -o "$work/out/etcd" .)

phase "verifying versions"
"$work/out/kube-apiserver" --version
"$work/out/etcd" --version | sed -n 1p  # not head: SIGPIPE under pipefail
build_install
