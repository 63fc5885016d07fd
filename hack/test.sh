#!/usr/bin/env bash
# `make test` (README's test command; CI's .ci/run calls it): lint, types, unit, conformance and
# integration tests on the real control plane, and what Python 3.13 changes, each step timed.
#
# The Go builds (etcd + kube-apiserver, kube-controller-manager + kubectl, helm, vcsim, upstream's
# openstack-cloud-controller-manager, upstream's Azure cloud-controller-manager +
# cloud-node-manager, upstream's Alibaba Cloud CCM; cached after the first run), and with them the real
# Octavia API's venv (hack/openstack/octavia-api.sh), run in the background while the steps that
# need none of them run (venv, lint, types, the unit layer); each part of the conformance and
# integration layers starts as soon as the builds it needs are done (see `groups` below).
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

# The background builds, in groups, one after the other in one background job (niced: the steps
# beside them keep their share of the two cores). Each group's end is reported through a FIFO,
# so the tests that need only that group (and the ones before it) start while the next group
# still builds: the first group (control plane, helm, vcsim) is what the chart tests and most of
# the integration layer need; each later group is one cloud's upstream binaries, and that
# cloud's tests run as soon as it is built.
#   group label | make targets built | make targets of the tests it unlocks
groups=(
  "control plane, helm, vcsim|controlplane helm vcsim|"
  "OCCM, Octavia API|occm octavia-api|integration-openstack"
  "Azure CCM + CNM|azure-upstream|integration-azure"
  "Alibaba Cloud CCM|alibabacloud-upstream|integration-alibabacloud"
)
ready=$(mktemp -u)
mkfifo "$ready"
exec 7<>"$ready"  # opened read-write: the build job's reports never block on a reader
rm -f "$ready"
(
  began=$(date +%s) reported=0
  # The waits below never outlive this job: a group it could not report is reported failed.
  trap 'for ((g = reported; g < ${#groups[@]}; g++)); do echo "1 0" >&7; done' EXIT
  for group in "${groups[@]}"; do
    IFS='|' read -r _ targets _ <<<"$group"
    # shellcheck disable=SC2086  # targets is a word list
    nice -n 10 $MAKE $targets 2>&1 | sed -u 's/^/[go builds] /'
    echo "${PIPESTATUS[0]} $(($(date +%s) - began))" >&7
    reported=$((reported + 1))
  done
) &
builds=$!
trap 'kill "$builds" "${venv313:-}" 2>/dev/null' EXIT  # an interrupted run leaves no build behind

# The Python 3.13 venv (pip installs only) is made beside everything else from the start, so the
# Python 3.13 step below only runs its tests.
venv313_log=$(mktemp)
$MAKE venv313 >"$venv313_log" 2>&1 &
venv313=$!
venv313_made() {  # its log, and whether it was made
  wait "$venv313"
  local rc=$?
  sed 's/^/[venv313] /' "$venv313_log"
  rm -f "$venv313_log"
  return "$rc"
}

build_summary() {  # build_summary NAME RC TOOK
  summary+=("$(printf '%-34s %5ds  %s' "$1" "$3" \
    "$([[ $2 == 0 ]] && echo ok || echo "FAILED (exit $2)")")")
}

if step "venv + wheelhouse" $MAKE venv wheelhouse; then
  step "lint (ruff, import-linter)" $MAKE lint
  step "types (mypy --strict)" $MAKE typecheck
  step "unit layer (but the chart tests)" $MAKE unit UNIT_MARKERS="not helm"
fi
group_built() {  # the next group's report; a failure when the build job is gone without one
  until read -r -t 5 group_rc group_took <&7; do
    kill -0 "$builds" 2>/dev/null || { group_rc=1 group_took=0; return 1; }
  done
  [[ $group_rc == 0 ]]
}
core_ok=0
for group in "${groups[@]}"; do
  IFS='|' read -r label _ tests <<<"$group"
  step "wait: $label" group_built
  build_summary "  (built in the background)" "${group_rc:-1}" "${group_took:-0}"
  [[ ${group_rc:-1} == 0 ]] || continue
  if [[ -z $tests ]]; then  # the first group
    core_ok=1
    step "chart tests (helm)" $MAKE unit UNIT_MARKERS="helm"
    step "conformance + integration (core)" $MAKE integration-core
    # What Python 3.13 changes (Makefile PY313_TESTS): it needs only the first group, so it
    # runs while upstream's binaries still build.
    step "wait: the Python 3.13 venv" venv313_made \
      && step "Python 3.13 (make test-py313)" $MAKE test-py313
  elif [[ $core_ok == 1 ]]; then
    step "integration: ${tests#integration-}" $MAKE "$tests"
  fi
done
wait "$builds"

printf '== [test %4ds] summary\n' "$(($(date +%s) - started))"
printf '   %s\n' "${summary[@]}"
exit "$status"
