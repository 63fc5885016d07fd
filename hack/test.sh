#!/usr/bin/env bash
# `make test` (README's test command; CI's .ci/run calls it): lint, types, unit, conformance and
# integration tests on the real control plane, each step timed.
#
# The Go builds (etcd + kube-apiserver, kube-controller-manager + kubectl, helm, vcsim, upstream's
# openstack-cloud-controller-manager, upstream's Azure cloud-controller-manager +
# cloud-node-manager; cached after the first run), and with them the real
# Octavia API's venv (hack/openstack/octavia-api.sh), run in the background while the steps that
# need none of them run (venv, lint, types, the unit layer); the conformance and integration
# layers wait for them.
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

go_log=$(mktemp)
(
  began=$(date +%s)
  # niced: the steps beside it (the unit layer) keep their share of the two cores
  nice -n 10 $MAKE controlplane helm vcsim occm azure-upstream octavia-api 2>&1 | sed -u 's/^/[go builds] /'
  rc=${PIPESTATUS[0]}
  echo "$rc $(($(date +%s) - began))" >"$go_log"
  exit "$rc"
) &
builds=$!
trap 'kill "$builds" 2>/dev/null' EXIT  # an interrupted run leaves no build behind

if step "venv + wheelhouse" $MAKE venv wheelhouse; then
  step "lint (ruff, import-linter)" $MAKE lint
  step "types (mypy --strict)" $MAKE typecheck
  step "unit layer (but the chart tests)" $MAKE unit UNIT_MARKERS="not helm"
fi
step "Go builds (the wait for them)" wait "$builds"
read -r go_rc go_took <"$go_log" || { go_rc=1 go_took=0; }
rm -f "$go_log"
summary+=("$(printf '%-34s %5ds  %s' "  Go builds, in the background" "$go_took" \
  "$([[ $go_rc == 0 ]] && echo ok || echo "FAILED (exit $go_rc)")")")
if [[ $go_rc == 0 ]]; then
  step "chart tests (helm)" $MAKE unit UNIT_MARKERS="helm"
  step "conformance + integration" $MAKE integration
fi

printf '== [test %4ds] summary\n' "$(($(date +%s) - started))"
printf '   %s\n' "${summary[@]}"
exit "$status"
