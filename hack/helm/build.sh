#!/usr/bin/env bash
# Build helm from Go modules (never downloads a prebuilt binary).
#
# Output: $KCCM_CACHE_DIR/bin/helm-<version>/helm
#         (KCCM_CACHE_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/kccm)
# helm.sh/helm/v3 has no replace directives, so a plain `go install module@version` works; no
# wrapper module is needed. The version is stamped with ldflags as helm's own Makefile does.
# The result is reused while the pin and this script are unchanged; a lock keeps concurrent
# builds apart. Progress and elapsed time are printed while it runs (hack/lib.sh).
#
# Usage: hack/helm/build.sh [--print-dir | --print-hash]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=../lib.sh
source "$here/../lib.sh"

build_init helm "helm-${HELM_VERSION}" helm -- "$here/versions.env" "$here/build.sh" -- "$@"
build_lock helm-build.lock
export CGO_ENABLED=0 GOTOOLCHAIN=local
log "go: $(go version); helm $HELM_VERSION"
build_workdir helm-build

phase "downloading helm.sh/helm/v3@$HELM_VERSION metadata"
release_gomod=$(go_mod_file helm.sh/helm/v3 "$HELM_VERSION")
if grep -q '^replace\|^[[:space:]]*replace' "$release_gomod"; then
  die "helm $HELM_VERSION's go.mod has replace directives; go install would refuse it"
fi

# helm's Makefile stamps the Kubernetes version it was built against (client-go v0.M.P -> 1.M);
# it becomes the default .Capabilities.KubeVersion of `helm template`.
client_go=$(sed -n 's#^[[:space:]]*k8s.io/client-go v0\.\([0-9]*\)\..*#\1#p' "$release_gomod" | head -1)
[[ -n "$client_go" ]] || die "no k8s.io/client-go requirement in $release_gomod"
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
build_install
