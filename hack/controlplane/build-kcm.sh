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
# Usage: hack/controlplane/build-kcm.sh [--print-dir | --print-hash]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=../lib.sh
source "$here/../lib.sh"
# shellcheck source=kubernetes.sh
source "$here/kubernetes.sh"

commands=(kube-controller-manager kubectl)
build_init kcm "${KUBERNETES_VERSION}-${ETCD_VERSION}" "${commands[@]}" -- \
  "$here/versions.env" "$here/build-kcm.sh" "$here/kubernetes.sh" -- "$@"
build_stamp_file .kcm-build-complete
build_lock build.lock  # build.sh's lock: one Go build at a time, sharing its cache
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
log "go: $(go version); kubernetes $KUBERNETES_VERSION: ${commands[*]}"
build_workdir kcm-build

phase "locating k8s.io/kubernetes@$KUBERNETES_VERSION (downloaded by build.sh)"
release_gomod=$(go_mod_file k8s.io/kubernetes "$KUBERNETES_VERSION")
# The same module graph as build.sh's kube-apiserver module (same requirement, same staging
# replacements), so Go's build cache serves every package the two share.
module="$work/module"
mkdir -p "$module"
tools=()
for c in "${commands[@]}"; do tools+=("tool k8s.io/kubernetes/cmd/$c"); done
k8s_go_mod kccm.invalid/controlplane/kcm "$release_gomod" "${tools[@]}" >"$module/go.mod"

phase "resolving modules (go mod tidy; already in the module cache after build.sh)"
(cd "$module" && go mod tidy)
packages=()
for c in "${commands[@]}"; do packages+=("k8s.io/kubernetes/cmd/$c"); done
phase "compiling ${commands[*]} (after build.sh: a few minutes on 2 cores)"
mkdir -p "$work/out"
(cd "$module" && go build -trimpath -ldflags "$(k8s_ldflags)" -o "$work/out/" "${packages[@]}")

phase "verifying versions"
"$work/out/kube-controller-manager" --version
# sed reads to the end: `head -1` may exit first and kubectl die of SIGPIPE (exit 141, pipefail)
"$work/out/kubectl" version --client 2>/dev/null | sed -n 1p
build_install
