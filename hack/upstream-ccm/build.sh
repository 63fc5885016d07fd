#!/usr/bin/env bash
# Build upstream's cloud-controller-manager (k8s.io/cloud-provider's framework with upstream's
# own fake cloud registered as "fake") from Go modules, never a prebuilt binary: the wrapper
# module hack/upstream-ccm (go.mod + main.go, modeled on the release's sample/basic_main.go)
# requires k8s.io/cloud-provider at the version its go.mod pins. Bench-only (it is what
# bench/node_init_vs_upstream.py compares kccm with): not part of `make test` or CI.
#
# Output: $KCCM_CACHE_DIR/bin/upstream-ccm-<version>/cloud-controller-manager
#         (KCCM_CACHE_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/kccm)
# The result is reused while these build inputs are unchanged; a lock keeps concurrent builds
# apart. Progress and elapsed time are printed while it runs (hack/lib.sh). Before compiling it
# checks that the build list holds every version k8s.io/cloud-provider's go.mod pins.
#
# Usage: hack/upstream-ccm/build.sh [--print-dir | --print-hash]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib.sh
source "$here/../lib.sh"

module=k8s.io/cloud-provider
binary=cloud-controller-manager
CCM_VERSION=$(sed -n "s#^[[:space:]]*$module \(v[^ ]*\)\$#\1#p" "$here/go.mod")
[[ -n "$CCM_VERSION" ]] || { echo "error: no '$module' requirement in $here/go.mod" >&2; exit 1; }
# The matching Kubernetes version (v0.36.3 -> v1.36.3), for `--version`.
KUBE_VERSION="v1.${CCM_VERSION#v0.}"

build_init upstream-ccm "upstream-ccm-${CCM_VERSION}" "$binary" -- \
  "$here/build.sh" "$here/go.mod" "$here/main.go" "$here/../lib.sh" -- "$@"
build_lock upstream-ccm-build.lock
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
log "go: $(go version); $module $CCM_VERSION"
build_workdir upstream-ccm-build

phase "locating $module@$CCM_VERSION"
release_gomod=$(go_mod_file "$module" "$CCM_VERSION")
[[ "$(grep -m1 '^go ' "$here/go.mod")" == "$(grep -m1 '^go ' "$release_gomod")" ]] \
  || die "the go directive of hack/upstream-ccm/go.mod is not $module@$CCM_VERSION's"

ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitTreeState=clean"
done
wrapper_module_build upstream-ccm "$here" "$release_gomod" "$binary" "$ldflags" \
  "cold Go build cache: ~9 CPU-minutes; after make controlplane: 30 s"
build_install
