#!/usr/bin/env bash
# Build kccm-vcsim (govmomi's vCenter simulator, see main.go) from Go modules.
#
# Output: $KCCM_CACHE_DIR/bin/vcsim-<govmomi>/vcsim
#         (KCCM_CACHE_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/kccm)
# The result is reused while the pin and these build inputs are unchanged; a lock keeps
# concurrent builds apart. Progress and elapsed time are printed while it runs.
#
# Usage: hack/vcsim/build.sh [--print-dir]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache_root=${KCCM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kccm}
bin_dir="$cache_root/bin/vcsim-${GOVMOMI_VERSION}"
if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$bin_dir"
  exit 0
fi

inputs_hash=$(cat "$here/versions.env" "$here/build.sh" "$here/main.go" | sha256sum | cut -c1-16)
stamp="$bin_dir/.build-complete"

log() { printf '[vcsim-build %4ds] %s\n' "$SECONDS" "$*"; }

is_fresh() { [[ -x "$bin_dir/vcsim" && -f "$stamp" && "$(cat "$stamp")" == "$inputs_hash" ]]; }

if is_fresh; then
  log "cached binary is current: $bin_dir/vcsim"
  exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/vcsim-build.lock"
if ! flock -n 9; then
  log "another build holds $cache_root/vcsim-build.lock; waiting for it"
  flock 9
fi
if is_fresh; then
  log "another build finished the binary: $bin_dir/vcsim"
  exit 0
fi

command -v go >/dev/null || { echo "error: the Go toolchain (go) is not on PATH" >&2; exit 1; }
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
log "go: $(go version); govmomi $GOVMOMI_VERSION"

# A heartbeat so long compile phases never sit silent.
phase_file=$(mktemp)
echo "starting" >"$phase_file"
start_epoch=$(date +%s)
( while sleep 30; do printf '[vcsim-build %4ds] ... still working: %s\n' \
    "$(( $(date +%s) - start_epoch ))" "$(cat "$phase_file" 2>/dev/null)"; done ) 2>/dev/null &
heartbeat=$!
work=$(mktemp -d "$cache_root/vcsim-build.XXXXXX")
trap 'pkill -P $heartbeat 2>/dev/null; kill $heartbeat 2>/dev/null || true; rm -rf "$work" "$phase_file"' EXIT
phase() { echo "$*" >"$phase_file"; log "$*"; }

phase "downloading github.com/vmware/govmomi@$GOVMOMI_VERSION metadata"
release_gomod=$(cd "$work" && go mod download -json "github.com/vmware/govmomi@$GOVMOMI_VERSION" \
  | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[[ -f "$release_gomod" ]] || { echo "error: could not download govmomi $GOVMOMI_VERSION go.mod" >&2; exit 1; }
go_line=$(grep -m1 '^go ' "$release_gomod")

cp "$here/main.go" "$work/"
printf 'module kccm.invalid/vcsim\n\n%s\n\nrequire github.com/vmware/govmomi %s\n' \
  "$go_line" "$GOVMOMI_VERSION" >"$work/go.mod"
phase "resolving modules (go mod tidy)"
(cd "$work" && go mod tidy)
phase "compiling vcsim (cold: about 1 min on 2 cores)"
(cd "$work" && go build -trimpath -ldflags "-s -w" -o "$work/out/vcsim" .)

phase "verifying the binary starts"
{ "$work/out/vcsim" -h 2>&1 || true; } | head -1

mkdir -p "$bin_dir"
mv -f "$work/out/vcsim" "$bin_dir/"
echo "$inputs_hash" >"$stamp"
log "done: $bin_dir/vcsim"
