# shellcheck shell=bash
# The plumbing every Go build script under hack/ shares (sourced, never run):
#
#   build_init NAME BIN_SUBDIR OUTPUTS... -- INPUTS... -- "$@"
#       cache_root ($KCCM_CACHE_DIR, default ${XDG_CACHE_HOME:-$HOME/.cache}/kccm), bin_dir
#       ($cache_root/bin/BIN_SUBDIR), the OUTPUTS that go there and the INPUTS whose hash the
#       stamp holds. Answers `--print-dir` and `--print-hash` and exits.
#   build_stamp_file NAME
#       The stamp's file name in bin_dir (default .build-complete).
#   build_lock LOCK_NAME
#       Exits 0 at once while the stamp is current (a warm cache rebuilds nothing); otherwise
#       takes $cache_root/LOCK_NAME with flock (a parallel caller waits for the build under
#       way) and exits 0 if that build finished the outputs. Then requires go on PATH.
#   build_workdir PREFIX
#       work: a fresh directory in the cache (removed on exit); starts a heartbeat that prints
#       the current phase every 30 s so long compiles never sit silent.
#   phase TEXT / log TEXT
#       Progress lines "[NAME-build <elapsed s>] TEXT" (phase also feeds the heartbeat).
#   go_mod_file MODULE VERSION
#       The path of MODULE@VERSION's go.mod in the module cache (downloaded if missing).
#   build_install
#       Moves $work/out/<OUTPUTS> into bin_dir and writes the stamp.
#
#   wrapper_module_build NAME WRAPPER_DIR RELEASE_GOMOD BINARY LDFLAGS NOTE
#       The wrapper-module build of an upstream binary (needs $work from build_workdir).
#
# Apart from wrapper_module_build, this file decides nothing about what is built (the Go
# environment, flags and versions stay in the scripts), so it is not among those scripts' stamp
# inputs: changing it rebuilds nothing. The two scripts calling wrapper_module_build
# (hack/upstream-ccm/build.sh, hack/openstack/build-occm.sh) list it among theirs.
#
# Stamps written before a script's last change that did not change what it builds are listed in
# hack/stamp-aliases as "<current inputs hash> <earlier hash>": a cache holding the earlier stamp
# stays current. An alias applies only while the inputs hash is exactly the one it names, so any
# later change to a script, its versions or its Go sources ends it by itself.

hack_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

log() { printf '[%s-build %4ds] %s\n' "$build_name" "$SECONDS" "$*"; }

die() { echo "error: $*" >&2; exit 1; }

build_init() {
  build_name=$1 bin_subdir=$2
  shift 2
  build_outputs=()
  while [[ $1 != -- ]]; do build_outputs+=("$1"); shift; done
  shift
  local inputs=()
  while [[ $1 != -- ]]; do inputs+=("$1"); shift; done
  shift
  cache_root=${KCCM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kccm}
  bin_dir="$cache_root/bin/$bin_subdir"
  stamp="$bin_dir/.build-complete"
  inputs_hash=$(cat "${inputs[@]}" | sha256sum | cut -c1-16)
  case "${1:-}" in
    --print-dir) echo "$bin_dir"; exit 0 ;;
    --print-hash) echo "$inputs_hash"; exit 0 ;;
  esac
}

# Another stamp file name than .build-complete (for a second script filling the same bin_dir).
build_stamp_file() { stamp="$bin_dir/$1"; }

_outputs_list() {
  if [[ ${#build_outputs[@]} -eq 1 ]]; then
    echo "$bin_dir/${build_outputs[0]}"
  else
    echo "$bin_dir/{$(IFS=,; echo "${build_outputs[*]}")}"
  fi
}

_stamp_is_current() {
  [[ -f "$stamp" ]] || return 1
  local found
  found=$(cat "$stamp")
  [[ "$found" == "$inputs_hash" ]] || grep -qx "$inputs_hash $found" "$hack_dir/stamp-aliases"
}

is_fresh() {
  local output
  for output in "${build_outputs[@]}"; do [[ -x "$bin_dir/$output" ]] || return 1; done
  _stamp_is_current
}

build_lock() {
  local lock="$cache_root/$1"
  if is_fresh; then
    log "cached binaries are current: $(_outputs_list)"
    exit 0
  fi
  mkdir -p "$cache_root"
  exec 9>"$lock"
  if ! flock -n 9; then
    log "another build holds $lock; waiting for it"
    flock 9
  fi
  if is_fresh; then
    log "another build finished the binaries: $(_outputs_list)"
    exit 0
  fi
  command -v go >/dev/null || die "the Go toolchain (go) is not on PATH"
}

build_workdir() {
  phase_file=$(mktemp)
  echo "starting" >"$phase_file"
  local start_epoch
  start_epoch=$(date +%s)
  ( while sleep 30; do printf '[%s-build %4ds] ... still working: %s\n' "$build_name" \
      "$(( $(date +%s) - start_epoch ))" "$(cat "$phase_file" 2>/dev/null)"; done ) 2>/dev/null &
  heartbeat=$!
  work=$(mktemp -d "$cache_root/$1.XXXXXX")
  trap 'pkill -P $heartbeat 2>/dev/null; kill $heartbeat 2>/dev/null || true; rm -rf "$work" "$phase_file"' EXIT
}

phase() { echo "$*" >"$phase_file"; log "$*"; }

go_mod_file() {
  local gomod
  gomod=$(cd "$work" && go mod download -json "$1@$2" \
    | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  [[ -f "$gomod" ]] || die "could not download $1@$2 go.mod"
  echo "$gomod"
}

build_install() {
  local output
  mkdir -p "$bin_dir"
  for output in "${build_outputs[@]}"; do mv -f "$work/out/$output" "$bin_dir/"; done
  echo "$inputs_hash" >"$stamp"
  log "done: $(_outputs_list)"
}

# The wrapper-module build of an upstream binary (hack/upstream-ccm/build.sh,
# hack/openstack/build-occm.sh): copy the wrapper's go.mod and main.go into $work/NAME, resolve
# its modules, check that every module the binary is built from that the release's go.mod pins
# is selected at the pinned version (`go list -m all` fails on some releases' own graphs:
# k8s.io/kubernetes requires staging modules at v0.0.0 that no replace directive covers, so
# the modules of the build are listed), compile with LDFLAGS, print the binary's --version.
# Usage: wrapper_module_build NAME WRAPPER_DIR RELEASE_GOMOD BINARY LDFLAGS COMPILE_NOTE
wrapper_module_build() {
  local name=$1 wrapper=$2 release_gomod=$3 binary=$4 ldflags=$5 note=$6
  local src="$work/$name" mismatches
  mkdir -p "$src"
  cp "$wrapper/go.mod" "$wrapper/main.go" "$src/"
  phase "resolving modules (go mod tidy; a cold module cache downloads a few hundred MB)"
  (cd "$src" && go mod tidy)

  phase "checking the build list against the release's go.mod"
  mismatches=$(
    cd "$src" && go list -deps -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' . | sort -u \
      | awk 'NR == FNR { want[$1] = $2; next } ($1 in want) && want[$1] != $2 {
          print "  " $1 ": release pins " want[$1] ", wrapper selects " $2 }' \
        <(sed -n 's#^[[:space:]]*\([^ /]*\.[^ ]*\) \(v[^ ]*\).*#\1 \2#p' "$release_gomod") -
  )
  [[ -z "$mismatches" ]] || die "the wrapper's build list differs from the release's:
$mismatches"

  phase "compiling $binary ($note)"
  (cd "$src" && go build -trimpath -ldflags "$ldflags" -o "$work/out/$binary" .)

  phase "verifying version"
  "$work/out/$binary" --version 2>&1 | sed -n 1p  # not head: SIGPIPE under pipefail
}
