#!/usr/bin/env bash
# The real Octavia API (octavia from PyPI) that tests compare kccm's OpenStack emulator with.
#
# Install: a venv with octavia==$OCTAVIA_VERSION and the versions pinned in
#          octavia/constraints.txt, in $KCCM_CACHE_DIR/bin/octavia-<version>/ (KCCM_CACHE_DIR
#          defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/kccm). Reused while this script and the
#          constraints are unchanged (a stamp of their hash); a lock keeps concurrent installs
#          apart; progress and elapsed time are printed while it runs (hack/lib.sh). About 1-4
#          min on 2 cores (one package is built from its sdist). The interpreter is python3 on
#          PATH (KCCM_OCTAVIA_PYTHON overrides it); octavia 19 runs on Python 3.10-3.13.
# Serve:   the API on 127.0.0.1 with SQLite, noauth and no-op drivers (octavia/serve.py says
#          how), ready in about 10 s:
#            hack/openstack/octavia-api.sh serve --port PORT --state-dir DIR
#
# Usage: hack/openstack/octavia-api.sh [--print-dir | --print-hash | serve ARGS...]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OCTAVIA_VERSION=19.0.0
# shellcheck source=../lib.sh
source "$here/../lib.sh"

build_init octavia "octavia-$OCTAVIA_VERSION" bin/python -- \
  "$here/octavia-api.sh" "$here/octavia/constraints.txt" -- "$@"

if [[ ${1:-} == serve ]]; then
  shift
  is_fresh || die "octavia $OCTAVIA_VERSION is not installed in $bin_dir; run make octavia-api"
  exec "$bin_dir/bin/python" "$here/octavia/serve.py" "$@"
fi
[[ $# -eq 0 ]] || die "unknown arguments: $* (usage: $0 [--print-dir | --print-hash | serve ...])"

# As build_lock in hack/lib.sh, which also requires Go: none is needed here.
if is_fresh; then
  log "cached venv is current: $bin_dir"
  exit 0
fi
mkdir -p "$cache_root"
exec 9>"$cache_root/octavia.lock"
if ! flock -n 9; then
  log "another install holds $cache_root/octavia.lock; waiting for it"
  flock 9
fi
if is_fresh; then
  log "another install finished the venv: $bin_dir"
  exit 0
fi
python=${KCCM_OCTAVIA_PYTHON:-python3}
command -v "$python" >/dev/null || die "$python is not on PATH"
build_workdir octavia

phase "creating the venv ($("$python" --version))"
# The venv cannot be moved once made, so it is made in place; the stamp, written last, is what
# marks it complete (an interrupted install is removed and redone).
rm -rf "$bin_dir"
"$python" -m venv "$bin_dir"
phase "installing octavia==$OCTAVIA_VERSION and its ~130 dependencies"
PYTHONUNBUFFERED=1 TMPDIR=$work "$bin_dir/bin/pip" install --disable-pip-version-check --no-input \
  --progress-bar off -c "$here/octavia/constraints.txt" "octavia==$OCTAVIA_VERSION" \
  | grep --line-buffered -E '^(Collecting octavia|Building|Successfully built|Installing)' \
  | cut -c1-100 | sed -u 's/^/  /'
phase "checking that the API application imports"
"$bin_dir/bin/python" -W ignore -c 'import octavia.api.app, octavia.version as v; print(v.version_info)' \
  | sed -u 's/^/  octavia /'
echo "$inputs_hash" >"$stamp"
log "done: $bin_dir"
