#!/usr/bin/env bash
# `make test` (README's test command; CI's .ci/run calls it): lint, types, unit, conformance and
# integration tests on the real control plane, and what Python 3.13 changes, each step timed.
#
# The Go builds (etcd + kube-apiserver, kube-controller-manager + kubectl, helm, vcsim, upstream's
# openstack-cloud-controller-manager, upstream's Azure cloud-controller-manager +
# cloud-node-manager, upstream's Alibaba Cloud CCM; cached after the first run), and with them the real
# Octavia API's venv (hack/openstack/octavia-api.sh), run in the background while the steps that
# need none of them run (venv, lint, types, the unit layer); each part of the conformance and
# integration layers starts as soon as the builds it needs are done (see `groups` below). When
# every build is already cached (a warm machine), nothing waits for one: the integration layer runs
# whole, with the unit layer and Python 3.13 beside it (see "Warm caches" below).
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
trap 'kill "$builds" "${venv313:-}" "${chain:-}" 2>/dev/null' EXIT  # an interrupted run leaves no build behind

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
fi

# Each group's report (exit status, seconds since the builds began), in group order.
group_rcs=() group_tooks=()
next_report() {  # read the next group's report within $1 seconds; false when none came
  local rc took
  read -r -t "$1" rc took <&7 || return 1
  group_rcs+=("$rc") group_tooks+=("$took")
}
group_built() {  # group_built G: wait for group G's report (a failure when the build job is gone)
  until ((${#group_rcs[@]} > $1)); do
    next_report 5 && continue
    kill -0 "$builds" 2>/dev/null && continue
    while next_report 0.1; do :; done  # the job may have reported just before it ended
    ((${#group_rcs[@]} > $1)) || { group_rcs+=(1) group_tooks+=(0); }
  done
  [[ ${group_rcs[$1]} == 0 ]]
}
all_built_already() {  # true when every group was reported built (warm caches) within 5 s
  local deadline=$((SECONDS + 5))
  while ((${#group_rcs[@]} < ${#groups[@]} && SECONDS < deadline)); do next_report 1; done
  ((${#group_rcs[@]} == ${#groups[@]})) || return 1
  for rc in "${group_rcs[@]}"; do [[ $rc == 0 ]] || return 1; done
}

in_background() {  # in_background LOG COMMAND...: run niced, output to LOG, "rc seconds" to LOG.rc
  local log=$1 began rc
  shift
  began=$(date +%s)
  nice -n 5 "$@" >"$log" 2>&1
  rc=$?
  echo "$rc $(($(date +%s) - began))" >"$log.rc"
  return "$rc"
}
from_background() {  # from_background LOG NAME: show a finished background step, record it
  local log=$1 name=$2 rc=1 took=0
  [[ -s $log.rc ]] && read -r rc took <"$log.rc"
  [[ -f $log ]] && sed "s/^/[$name] /" "$log"
  summary+=("$(printf '%-34s %5ds  %s' "$name (beside)" "$took" \
    "$([[ $rc == 0 ]] && echo ok || echo "FAILED (exit $rc)")")")
  [[ $rc == 0 ]] || status=1
  rm -f "$log" "$log.rc"
}

if all_built_already; then
  # Warm caches: every binary is there, so nothing waits for a build. The integration layer runs
  # whole (core and every cloud in one pytest: no tail per part), and beside it, niced, the unit
  # layer (chart tests included) and then Python 3.13. Integration tests mostly wait on the
  # apiserver and on periods, so the CPU-bound unit layer fills the cores they leave idle.
  build_summary "  (all built before the tests)" 0 "${group_tooks[-1]}"
  step "wait: the Python 3.13 venv" venv313_made
  py313_venv=$?
  beside=$(mktemp -d)
  (
    in_background "$beside/unit" $MAKE unit
    [[ $py313_venv == 0 ]] && in_background "$beside/py313" $MAKE test-py313
  ) &
  chain=$!
  step "conformance + integration (all)" $MAKE integration
  wait "$chain"
  from_background "$beside/unit" "unit layer"
  from_background "$beside/py313" "Python 3.13"
  rm -rf "$beside"
else
  step "unit layer (but the chart tests)" $MAKE unit UNIT_MARKERS="not helm"
  core_ok=0
  for g in "${!groups[@]}"; do
    IFS='|' read -r label _ tests <<<"${groups[$g]}"
    step "wait: $label" group_built "$g"
    build_summary "  (built in the background)" "${group_rcs[$g]:-1}" "${group_tooks[$g]:-0}"
    [[ ${group_rcs[$g]:-1} == 0 ]] || continue
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
fi
wait "$builds"

printf '== [test %4ds] summary\n' "$(($(date +%s) - started))"
printf '   %s\n' "${summary[@]}"
exit "$status"
