#!/usr/bin/env bash
# Build kccm-vcsim (govmomi's vCenter simulator, see main.go) from Go modules.
#
# Output: $KCCM_CACHE_DIR/bin/vcsim-<govmomi>/vcsim
#         (KCCM_CACHE_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/kccm)
# The result is reused while the pin and these build inputs are unchanged; a lock keeps
# concurrent builds apart. Progress and elapsed time are printed while it runs (hack/lib.sh).
#
# Usage: hack/vcsim/build.sh [--print-dir | --print-hash]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=../lib.sh
source "$here/../lib.sh"

build_init vcsim "vcsim-${GOVMOMI_VERSION}" vcsim -- \
  "$here/versions.env" "$here/build.sh" "$here/main.go" -- "$@"
build_lock vcsim-build.lock
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
log "go: $(go version); govmomi $GOVMOMI_VERSION"
build_workdir vcsim-build

phase "downloading github.com/vmware/govmomi@$GOVMOMI_VERSION metadata"
release_gomod=$(go_mod_file github.com/vmware/govmomi "$GOVMOMI_VERSION")
cp "$here/main.go" "$work/"
printf 'module kccm.invalid/vcsim\n\n%s\n\nrequire github.com/vmware/govmomi %s\n' \
  "$(grep -m1 '^go ' "$release_gomod")" "$GOVMOMI_VERSION" >"$work/go.mod"
phase "resolving modules (go mod tidy)"
(cd "$work" && go mod tidy)
phase "compiling vcsim (cold: about 1 min on 2 cores)"
(cd "$work" && go build -trimpath -ldflags "-s -w" -o "$work/out/vcsim" .)

phase "verifying the binary starts"
{ "$work/out/vcsim" -h 2>&1 || true; } | head -1
build_install
