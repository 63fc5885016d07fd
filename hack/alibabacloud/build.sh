#!/usr/bin/env bash
# Build upstream's Alibaba Cloud cloud-controller-manager (kubernetes/cloud-provider-alibaba-cloud,
# `cmd/manager`, a controller-runtime manager) from its source archive, never a prebuilt binary.
# The Go module proxy refuses k8s.io/cloud-provider-alibaba-cloud (every version) and one of its
# dependencies, so the source comes as an archive with its vendor/ directory, checked against the
# SHA-256 pinned in versions.env, and compiles offline (-mod=vendor) as the release's Makefile
# does (its ldflags: -s -w and the version variables).
# Used by the tests that run upstream's binary against kccm's Alibaba Cloud emulator.
#
# The archive is looked up in $KCCM_UPSTREAM_ARCHIVES (a directory), by default the folder
# `shared/upstream` beside this checkout (<checkout>/../shared/upstream; for a linked git
# worktree, beside its main checkout). When it is not there the
# script says so and exits 0 without building: the tests that need the binary skip, naming the
# archive (kccm.testing.upstream.alibabacloud_manager), so a clone without the archive still runs
# every other test. A present archive with another checksum is an error.
#
# Output: $KCCM_CACHE_DIR/bin/alibabacloud-<version>/manager
#         (KCCM_CACHE_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/kccm)
# The result is reused while these build inputs are unchanged; a lock keeps concurrent builds
# apart. Progress and elapsed time are printed while it runs (hack/lib.sh).
#
# Usage: hack/alibabacloud/build.sh [--print-dir | --print-hash | --print-archive]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=../lib.sh
source "$here/../lib.sh"

# The checkout is the one git's common directory belongs to, so a linked worktree finds the
# archive beside its main checkout.
checkout=$(cd "$here/../.." && dirname "$(realpath "$(git rev-parse --git-common-dir 2>/dev/null || echo .git)")")
archives=${KCCM_UPSTREAM_ARCHIVES:-$(realpath -m "$checkout/../shared/upstream")}
archive="$archives/$ALIBABACLOUD_ARCHIVE"
[[ "${1:-}" == --print-archive ]] && { echo "$archive"; exit 0; }

build_init alibabacloud "alibabacloud-${ALIBABACLOUD_VERSION}" manager -- \
  "$here/build.sh" "$here/versions.env" -- "$@"
if [[ ! -f "$archive" ]]; then
  log "upstream's source archive is not here: $archive (set KCCM_UPSTREAM_ARCHIVES to its directory);"
  log "not building upstream's Alibaba Cloud CCM: the tests that run it will skip"
  exit 0
fi
build_lock alibabacloud-build.lock
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=vendor
log "go: $(go version); cloud-provider-alibaba-cloud $ALIBABACLOUD_VERSION ($ALIBABACLOUD_COMMIT)"
build_workdir alibabacloud-build

phase "checking and unpacking $archive"
echo "$ALIBABACLOUD_ARCHIVE_SHA256  $archive" | sha256sum -c --quiet - \
  || die "$archive does not have the SHA-256 pinned in hack/alibabacloud/versions.env"
tar -xzf "$archive" -C "$work"
src="$work/${ALIBABACLOUD_ARCHIVE%.tar.gz}"
[[ -d "$src/vendor" ]] || die "$archive has no vendor/ directory"

# The release Makefile's ldflags (VERSION_PKG's Version, GitCommit, BuildDate).
version_pkg=k8s.io/cloud-provider-alibaba-cloud/version
ldflags="-s -w -X $version_pkg.Version=$ALIBABACLOUD_VERSION"
ldflags+=" -X $version_pkg.GitCommit=$ALIBABACLOUD_COMMIT -X $version_pkg.BuildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
phase "compiling cmd/manager offline from vendor/ (cold: ~4.5 min on 2 cores)"
mkdir -p "$work/out"
(cd "$src" && go build -trimpath -ldflags "$ldflags" -o "$work/out/manager" ./cmd/manager)

phase "verifying the binary"
# The manager has no --version flag: it logs its version first, then answers --help (exit 2).
go version -m "$work/out/manager" | grep -q "path[[:space:]]*k8s.io/cloud-provider-alibaba-cloud/cmd/manager" \
  || die "the binary's build information does not name cmd/manager"
started=$("$work/out/manager" --help 2>&1 | sed -n 1p || true)  # not head: SIGPIPE under pipefail
[[ $started == *"Version: $ALIBABACLOUD_VERSION, git commit: $ALIBABACLOUD_COMMIT"* ]] \
  || die "the binary does not report $ALIBABACLOUD_VERSION ($ALIBABACLOUD_COMMIT): $started"
log "built: ${started#*\"msg\"=}"
build_install
