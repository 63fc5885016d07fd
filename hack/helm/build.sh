#!/usr/bin/env bash
# Build helm from Go modules (never downloads a prebuilt binary).
#
# Output: $KCCM_CACHE_DIR/bin/helm-<version>/helm
#         (KCCM_CACHE_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/kccm)
# helm.sh/helm/v3 has no replace directives, so a plain `go install module@version` works; no
# wrapper module is needed. The version is stamped with ldflags as helm's own Makefile does.
# The result is reused while the pin and this script are unchanged; a lock keeps concurrent
# builds apart. Progress and elapsed time are printed while it runs.
#
# Usage: hack/helm/build.sh [--print-dir]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache_root=${KCCM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kccm}
bin_dir="$cache_root/bin/helm-${HELM_VERSION}"
if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$bin_dir"
  exit 0
fi

inputs_hash=$(cat "$here/versions.env" "$here/build.sh" | sha256sum | cut -c1-16)
stamp="$bin_dir/.build-complete"

log() { printf '[helm-build %4ds] %s\n' "$SECONDS" "$*"; }

is_fresh() { [[ -x "$bin_dir/helm" && -f "$stamp" && "$(cat "$stamp")" == "$inputs_hash" ]]; }

if is_fresh; then
  log "cached binary is current: $bin_dir/helm"
  exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/helm-build.lock"
if ! flock -n 9; then
  log "another build holds $cache_root/helm-build.lock; waiting for it"
  flock 9
fi
if is_fresh; then
  log "another build finished the binary: $bin_dir/helm"
  exit 0
fi

command -v go >/dev/null || { echo "error: the Go toolchain (go) is not on PATH" >&2; exit 1; }
export CGO_ENABLED=0 GOTOOLCHAIN=local
log "go: $(go version); helm $HELM_VERSION"

# A heartbeat so long compile phases never sit silent.
phase_file=$(mktemp)
echo "starting" >"$phase_file"
start_epoch=$(date +%s)
( while sleep 30; do printf '[helm-build %4ds] ... still working: %s\n' \
    "$(( $(date +%s) - start_epoch ))" "$(cat "$phase_file" 2>/dev/null)"; done ) &
heartbeat=$!
work=$(mktemp -d "$cache_root/helm-build.XXXXXX")
trap 'kill $heartbeat 2>/dev/null || true; rm -rf "$work" "$phase_file"' EXIT
phase() { echo "$*" >"$phase_file"; log "$*"; }

phase "downloading helm.sh/helm/v3@$HELM_VERSION metadata"
release_gomod=$(cd "$work" && go mod download -json "helm.sh/helm/v3@$HELM_VERSION" \
  | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[[ -f "$release_gomod" ]] || { echo "error: could not download helm.sh/helm/v3@$HELM_VERSION go.mod" >&2; exit 1; }
if grep -q '^replace\|^[[:space:]]*replace' "$release_gomod"; then
  echo "error: helm $HELM_VERSION's go.mod has replace directives; go install would refuse it" >&2
  exit 1
fi

# helm's Makefile stamps the Kubernetes version it was built against (client-go v0.M.P -> 1.M);
# it becomes the default .Capabilities.KubeVersion of `helm template`.
client_go=$(sed -n 's#^[[:space:]]*k8s.io/client-go v0\.\([0-9]*\)\..*#\1#p' "$release_gomod" | head -1)
[[ -n "$client_go" ]] || { echo "error: no k8s.io/client-go requirement in $release_gomod" >&2; exit 1; }
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$client_go"
done

phase "downloading modules and compiling helm (cold: several minutes on 2 cores)"
(cd "$work" && GOBIN="$work/out" go install -trimpath -ldflags "$ldflags" \
  "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")

phase "verifying version"
"$work/out/helm" version --short

mkdir -p "$bin_dir"
mv -f "$work/out/helm" "$bin_dir/"
echo "$inputs_hash" >"$stamp"
log "done: $bin_dir/helm"
