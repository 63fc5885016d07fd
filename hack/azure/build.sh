#!/usr/bin/env bash
# Build upstream's Azure cloud-controller-manager and cloud-node-manager
# (sigs.k8s.io/cloud-provider-azure) from Go modules, never a prebuilt binary: the wrapper
# module hack/azure (go.mod + ccm/main.go + cnm/main.go, the release's two mains) requires the
# release; one `go build` of both packages shares the compile of everything they have in common.
# Used by tests/integration/azure/test_upstream_*.py (upstream's binaries against kccm's Azure
# emulator) and the azure bench.
#
# Output: $KCCM_CACHE_DIR/bin/azure-<version>/{cloud-controller-manager,cloud-node-manager}
#         (KCCM_CACHE_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/kccm)
# The result is reused while these build inputs are unchanged; a lock keeps concurrent builds
# apart. Progress and elapsed time are printed while it runs (hack/lib.sh). Before compiling it
# checks that the wrapper builds what the release builds: both mains are the release's, the go
# and godebug directives are the release's, and the build list holds every version it pins.
# (hack/lib.sh's wrapper_module_build builds one package from a main.go at the wrapper's root;
# this script does the same steps for two packages.)
#
# Usage: hack/azure/build.sh [--print-dir | --print-hash]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib.sh
source "$here/../lib.sh"

module=sigs.k8s.io/cloud-provider-azure
AZURE_VERSION=$(sed -n "s#^require $module \(v[^ ]*\)\$#\1#p" "$here/go.mod")
[[ -n "$AZURE_VERSION" ]] || { echo "error: no 'require $module' in $here/go.mod" >&2; exit 1; }
# wrapper package -> the release's main it copies, and the binary it builds
declare -A release_main=(
  [ccm]=cmd/cloud-controller-manager/controller-manager.go
  [cnm]=cmd/cloud-node-manager/node-manager.go
)
declare -A binary=([ccm]=cloud-controller-manager [cnm]=cloud-node-manager)

build_init azure "azure-${AZURE_VERSION}" cloud-controller-manager cloud-node-manager -- \
  "$here/build.sh" "$here/go.mod" "$here/ccm/main.go" "$here/cnm/main.go" -- "$@"
build_lock azure-build.lock
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
log "go: $(go version); $module $AZURE_VERSION"
build_workdir azure-build

# `go install`/`go list` of the release go through the proxy's @v/list, which is refused here
# (403); naming the version downloads the module directly.
phase "downloading $module@$AZURE_VERSION"
release_dir=$(cd "$work" && go mod download -json "$module@$AZURE_VERSION" \
  | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
release_gomod="$release_dir/go.mod"
[[ -f "$release_gomod" ]] || die "could not download $module@$AZURE_VERSION"

# The same mains as the release, the same go and godebug directives.
for pkg in ccm cnm; do
  sed '1,/^\/\/ ---- upstream file below ----$/d' "$here/$pkg/main.go" \
    | cmp -s - "$release_dir/${release_main[$pkg]}" \
    || die "hack/azure/$pkg/main.go differs from $module@$AZURE_VERSION ${release_main[$pkg]}"
done
for directive in go godebug; do
  [[ "$(grep -m1 "^$directive " "$here/go.mod")" == "$(grep -m1 "^$directive " "$release_gomod")" ]] \
    || die "the $directive directive of hack/azure/go.mod is not $module@$AZURE_VERSION's"
done

src="$work/azure"
mkdir -p "$src/ccm" "$src/cnm"
cp "$here/go.mod" "$src/"
for pkg in ccm cnm; do cp "$here/$pkg/main.go" "$src/$pkg/"; done
phase "resolving modules (go mod tidy; a cold module cache downloads a few hundred MB)"
(cd "$src" && go mod tidy)

phase "checking the build list against the release's go.mod"
mismatches=$(
  cd "$src" && go list -deps -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' ./ccm ./cnm \
    | sort -u \
    | awk 'NR == FNR { want[$1] = $2; next } ($1 in want) && want[$1] != $2 {
        print "  " $1 ": release pins " want[$1] ", wrapper selects " $2 }' \
      <(sed -n 's#^[[:space:]]*\([^ /]*\.[^ ]*\) \(v[^ ]*\).*#\1 \2#p' "$release_gomod") -
)
[[ -z "$mismatches" ]] || die "the wrapper's build list differs from the release's:
$mismatches"

# The release's version stamping (its hack/pkg-config.sh), with the tag for the git describe.
ldflags="-s -w"
for pkg in $module/pkg/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$AZURE_VERSION -X $pkg.gitTreeState=clean"
done
phase "compiling cloud-controller-manager and cloud-node-manager (cold: ~6.5 min on 2 cores)"
# `go build -o DIR/` of two packages names each binary after its package directory.
mkdir -p "$work/out" "$work/pkgs"
(cd "$src" && go build -trimpath -ldflags "$ldflags" -o "$work/pkgs/" ./ccm ./cnm)
for pkg in ccm cnm; do mv "$work/pkgs/$pkg" "$work/out/${binary[$pkg]}"; done

phase "verifying versions"
for pkg in ccm cnm; do
  log "${binary[$pkg]}: $("$work/out/${binary[$pkg]}" --version 2>&1 | sed -n 1p)"
done
build_install
