# shellcheck shell=bash
# What build.sh and build-kcm.sh share about building from k8s.io/kubernetes (sourced after
# hack/lib.sh; both hash this file into their stamps): the wrapper module's go.mod, which
# requires the release and replaces every staging module as the release's own go.mod does, and
# the version ldflags.

# k8s_go_mod MODULE_PATH RELEASE_GOMOD [LINE...]: the wrapper go.mod on stdout; the LINEs (e.g.
# `tool` directives) go between the requirement and the replacements.
k8s_go_mod() {
  local module=$1 release_gomod=$2 staging_version="v0.${KUBERNETES_VERSION#v1.}"
  shift 2
  local staging godebug go_line m
  # Every staging module is replaced by './staging/src/<module>' in the release's go.mod.
  mapfile -t staging < <(sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/.*#\1#p' "$release_gomod")
  [[ ${#staging[@]} -gt 10 ]] || die "found only ${#staging[@]} staging modules in $release_gomod"
  godebug=$(grep -m1 '^godebug' "$release_gomod" || true)
  go_line=$(grep -m1 '^go ' "$release_gomod")
  log "derived ${#staging[@]} staging replacements at $staging_version from the release go.mod" >&2
  echo "module $module"
  echo
  echo "$go_line"
  [[ -n "$godebug" ]] && { echo; echo "$godebug"; }
  echo
  echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
  [[ $# -gt 0 ]] && { echo; printf '%s\n' "$@"; }
  echo
  echo "replace ("
  for m in "${staging[@]}"; do echo "	$m => $m $staging_version"; done
  echo ")"
}

# k8s_ldflags: -s -w and the version variables `kube-apiserver --version` etc. print.
k8s_ldflags() {
  local minor=${KUBERNETES_VERSION#v1.} build_date ldflags="-s -w" pkg
  minor=${minor%%.*}
  build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
  done
  echo "$ldflags"
}

# k8s_go_line RELEASE_GOMOD: the release's `go` directive (for modules beside the wrapper).
k8s_go_line() { grep -m1 '^go ' "$1"; }
