#!/usr/bin/env bash
# `make test` (README's test command; CI's .ci/run calls it): lint, types, unit, conformance and
# integration tests on the real control plane, each step timed.
#
# The Go builds (etcd + kube-apiserver, kube-controller-manager + kubectl, helm, vcsim, upstream's
# openstack-cloud-controller-manager, upstream's Azure cloud-controller-manager +
# cloud-node-manager; cached after the first run), and with them the real
# Octavia API's venv (hack/openstack/octavia-api.sh), run in the background while the steps that
# need none of them run (venv, lint, types, the unit layer); the conformance and integration
# layers wait for the builds they need (see below).
# Every step runs even when an earlier one failed, so one run shows every failure; the exit
# status is non-zero when any step failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MAKE="${MAKE:-make} --no-print-directory"
started=$(date +%s)
summary=()
status=0

step() {  # step NAME COMMAND...: run, time and record one step
  local name=$1 began rc
  shift
  began=$(date +%s)
  printf '== [test %4ds] %s\n' "$((began - started))" "$name"
  "$@"
  rc=$?
  summary+=("$(printf '%-34s %5ds  %s' "$name" "$(($(date +%s) - began))" \
    "$([[ $rc == 0 ]] && echo ok || echo "FAILED (exit $rc)")")")
  [[ $rc == 0 ]] || status=1
  return "$rc"
}

# Two groups of Go builds, one after the other in one background job (niced: the steps beside
# them keep their share of the two cores). The first (control plane, helm, vcsim) is all the
# chart tests and most of the integration layer need: its end is reported through a FIFO, so
# that half starts while the second group (upstream's OCCM and Azure binaries, the Octavia API)
# still builds; the openstack and azure tests wait for all of them.
go_log=$(mktemp)
ready=$(mktemp -u)
mkfifo "$ready"
exec 7<>"$ready"  # opened read-write: the build job's report never blocks on a reader
rm -f "$ready"
(
  began=$(date +%s)
  trap '[[ -n ${reported:-} ]] || echo "1 0" >&7' EXIT  # the wait below never outlives this job
  nice -n 10 $MAKE controlplane helm vcsim 2>&1 | sed -u 's/^/[go builds] /'
  rc=${PIPESTATUS[0]}
  echo "$rc $(($(date +%s) - began))" >&7
  reported=1
  [[ $rc == 0 ]] || { echo "$rc $(($(date +%s) - began))" >"$go_log"; exit "$rc"; }
  nice -n 10 $MAKE occm azure-upstream octavia-api 2>&1 | sed -u 's/^/[go builds] /'
  rc=${PIPESTATUS[0]}
  echo "$rc $(($(date +%s) - began))" >"$go_log"
  exit "$rc"
) &
builds=$!
trap 'kill "$builds" 2>/dev/null' EXIT  # an interrupted run leaves no build behind

build_summary() {  # build_summary NAME RC TOOK
  summary+=("$(printf '%-34s %5ds  %s' "$1" "$3" \
    "$([[ $2 == 0 ]] && echo ok || echo "FAILED (exit $2)")")")
}

if step "venv + wheelhouse" $MAKE venv wheelhouse; then
  step "lint (ruff, import-linter)" $MAKE lint
  step "types (mypy --strict)" $MAKE typecheck
  step "unit layer (but the chart tests)" $MAKE unit UNIT_MARKERS="not helm"
fi
core_built() {  # the first group's report; a failure when the build job is gone without one
  until read -r -t 5 core_rc core_took <&7; do
    kill -0 "$builds" 2>/dev/null || { core_rc=1 core_took=0; return 1; }
  done
}
step "wait: control plane, helm, vcsim" core_built
build_summary "  (built in the background)" "${core_rc:-1}" "${core_took:-0}"
if [[ ${core_rc:-1} == 0 ]]; then
  step "chart tests (helm)" $MAKE unit UNIT_MARKERS="helm"
  step "conformance + integration (core)" $MAKE integration-core
fi
step "wait: OCCM, Azure, Octavia API" wait "$builds"
read -r go_rc go_took <"$go_log" || { go_rc=1 go_took=0; }
rm -f "$go_log"
build_summary "  (all builds, in the background)" "$go_rc" "$go_took"
if [[ $go_rc == 0 ]]; then
  step "integration (openstack, azure)" $MAKE integration-clouds
fi

printf '== [test %4ds] summary\n' "$(($(date +%s) - started))"
printf '   %s\n' "${summary[@]}"
exit "$status"
