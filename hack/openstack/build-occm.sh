#!/usr/bin/env bash
# Build upstream's openstack-cloud-controller-manager (OCCM) from Go modules (never downloads a
# prebuilt binary): the wrapper module hack/openstack/occm (go.mod + the release's main.go)
# requires k8s.io/cloud-provider-openstack at the version its go.mod pins and repeats the
# release's replace directives, which `go install ...@<version>` refuses.
#
# Output: $KCCM_CACHE_DIR/bin/occm-<version>/openstack-cloud-controller-manager
#         (KCCM_CACHE_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/kccm)
# The result is reused while these build inputs are unchanged; a lock keeps concurrent builds
# apart. Progress and elapsed time are printed while it runs (hack/lib.sh). Before compiling it
# checks that the wrapper builds what the release builds: main.go is the release's, the
# replacements are the release's, and the build list holds every version the release pins.
#
# Usage: hack/openstack/build-occm.sh [--print-dir | --print-hash]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib.sh
source "$here/../lib.sh"

module=k8s.io/cloud-provider-openstack
binary=openstack-cloud-controller-manager
OCCM_VERSION=$(sed -n "s#^require $module \(v[^ ]*\)\$#\1#p" "$here/occm/go.mod")
[[ -n "$OCCM_VERSION" ]] || { echo "error: no 'require $module' in $here/occm/go.mod" >&2; exit 1; }

build_init occm "occm-${OCCM_VERSION}" "$binary" -- \
  "$here/build-occm.sh" "$here/occm/go.mod" "$here/occm/main.go" "$here/../lib.sh" -- "$@"
build_lock occm-build.lock
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
log "go: $(go version); $module $OCCM_VERSION"
build_workdir occm-build

phase "downloading $module@$OCCM_VERSION"
release_dir=$(cd "$work" && go mod download -json "$module@$OCCM_VERSION" \
  | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
release_gomod="$release_dir/go.mod"
[[ -f "$release_gomod" ]] || die "could not download $module@$OCCM_VERSION"

# The same main as the release, the same replacements, the same go directive.
sed '1,/^\/\/ ---- upstream file below ----$/d' "$here/occm/main.go" \
  | cmp -s - "$release_dir/cmd/$binary/main.go" \
  || die "hack/openstack/occm/main.go differs from $module@$OCCM_VERSION cmd/$binary/main.go"
replaces() { sed -n '/^replace (/,/^)/p' "$1"; }
[[ "$(replaces "$here/occm/go.mod")" == "$(replaces "$release_gomod")" ]] \
  || die "the replace block of hack/openstack/occm/go.mod is not $module@$OCCM_VERSION's"
[[ "$(grep -m1 '^go ' "$here/occm/go.mod")" == "$(grep -m1 '^go ' "$release_gomod")" ]] \
  || die "the go directive of hack/openstack/occm/go.mod is not $module@$OCCM_VERSION's"

ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$OCCM_VERSION"
ldflags+=" -X $module/pkg/version.Version=$OCCM_VERSION"
wrapper_module_build occm "$here/occm" "$release_gomod" "$binary" "$ldflags" \
  "cold: several minutes on 2 cores"
build_install
