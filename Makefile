# kccm developer targets. CI runs `make test` (see .ci/run); README names `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

# Python's bytecode cache stays on for everything make runs, even where the environment turns
# it off (PYTHONDONTWRITEBYTECODE=1, common in container images): the tests start several
# hundred Python processes (daemons, emulators, CLI runs, pytest workers), and without the
# cache each compiles every module it imports from source again (kccm's own, moto's, the
# SDKs', and pytest's rewritten test modules): about 0.5 CPU-s a process and 25 a pytest worker.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: help venv wheelhouse controlplane helm vcsim octavia-api occm azure-upstream alibabacloud-upstream upstream-ccm test-vsphere lint format typecheck unit integration integration-core integration-openstack integration-azure integration-alibabacloud test test-aws demo clean venv313 test-py313 flake-hunt flags-doc walkthroughs

help:
	@echo "make demo          the local provider end to end: control plane, 3 nodes, kccm, a LoadBalancer"
	@echo "make test          lint, types, unit and integration tests (builds the control plane)"
	@echo "make controlplane  build etcd, kube-apiserver, kube-controller-manager, kubectl from Go modules (cached)"
	@echo "make helm          build helm from Go modules (cached; the chart tests use it)"
	@echo "make vcsim         build vcsim (govmomi's vCenter simulator) from Go modules (cached)"
	@echo "make octavia-api   install the real Octavia API (octavia from PyPI, own venv, cached)"
	@echo "make occm          build upstream's openstack-cloud-controller-manager from Go modules (cached)"
	@echo "make azure-upstream build upstream's Azure cloud-controller-manager + cloud-node-manager (cached)"
	@echo "make alibabacloud-upstream build upstream's Alibaba Cloud CCM from its source archive (cached)"
	@echo "make upstream-ccm  build upstream's cloud-controller-manager (k8s.io/cloud-provider + its fake; bench only)"
	@echo "make test-vsphere  the vsphere provider's tests (unit, conformance, vcsim + apiserver)"
	@echo "make test-py313    unit + conformance tests and the demo on Python 3.13 (in .venv313)"
	@echo "make test-aws      the aws provider's tests (unit, conformance, daemon e2e) against moto"
	@echo "make flake-hunt    the integration layer 5 times in random order (hack/flake-hunt.sh)"
	@echo "make flags-doc     regenerate docs/flags.md from the flag definitions"
	@echo "make walkthroughs  DEVELOPMENT.md's three walk-throughs done literally in a scratch copy (slow)"
	@echo "make lint | format | typecheck | unit | integration | wheelhouse"

# The venvs are filled by uv (pinned; itself installed by the venv's own pip): the same
# packages pip would choose, resolved and installed in seconds instead of a minute.
UV_VERSION := 0.13.9

$(STAMP): pyproject.toml
	@echo "== creating $(VENV) and installing kccm with dev tools (uv $(UV_VERSION))"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv==$(UV_VERSION)
	$(VENV)/bin/uv pip install --quiet --python $(PY) -e '.[dev]' -e examples/external-provider
	@touch $@

venv: $(STAMP)

# Wheels of kccm's dependencies (and pip, hatchling) for tests that build a fresh virtual
# environment (the provider guide's walk-through): they install from here, never from the
# package index during a test run.
WHEELHOUSE := $(VENV)/wheelhouse
$(WHEELHOUSE)/.complete: pyproject.toml $(STAMP)
	@echo "== filling $(WHEELHOUSE) (wheels for tests that install into a fresh venv)"
	rm -rf $(WHEELHOUSE)
	$(PY) -m pip wheel --quiet -w $(WHEELHOUSE) pip hatchling editables '.[testing]'
	rm -f $(WHEELHOUSE)/kccm-*.whl
	@touch $@

wheelhouse: $(WHEELHOUSE)/.complete

# pytest-xdist workers: each starts its own control plane, moto and vcsim on first use, so
# workers share nothing but the machine. Integration tests mostly wait (apiserver, leases,
# periods), so they run more workers than there are cores. Modules stay on one worker
# (module-scoped daemons and worlds).
UNIT_WORKERS ?= 2
INTEGRATION_WORKERS ?= 4
XDIST_UNIT := -n $(UNIT_WORKERS) --dist loadfile
XDIST_INTEGRATION := -n $(INTEGRATION_WORKERS) --dist loadfile

# build-kcm.sh has its own stamp: adding kube-controller-manager + kubectl never rebuilds the
# apiserver; it compiles after build.sh (same lock) with Go's build cache warm.
controlplane:
	@bash hack/controlplane/build.sh
	@bash hack/controlplane/build-kcm.sh

helm:
	@bash hack/helm/build.sh

vcsim:
	@bash hack/vcsim/build.sh

# The real Octavia API the OpenStack emulator is compared with (tests/integration/openstack).
octavia-api:
	@bash hack/openstack/octavia-api.sh

# Upstream's OCCM (hack/openstack/occm: a wrapper module, see build-occm.sh): the openstack
# tests run it against kccm's emulator and migrate from it to kccm.
occm:
	@bash hack/openstack/build-occm.sh

# Upstream's Azure cloud-controller-manager and cloud-node-manager (hack/azure: a wrapper module,
# see build.sh): tests/integration/azure runs them against kccm's Azure emulator.
azure-upstream:
	@bash hack/azure/build.sh

# Upstream's Alibaba Cloud CCM (hack/alibabacloud: from the source archive in
# $KCCM_UPSTREAM_ARCHIVES or ../shared/upstream; without the archive it builds nothing and
# tests/integration/alibabacloud skips what needs it).
alibabacloud-upstream:
	@bash hack/alibabacloud/build.sh

# Upstream's cloud-controller-manager (hack/upstream-ccm: k8s.io/cloud-provider's framework with
# its own fake cloud) for bench/node_init_vs_upstream.py. Bench-only: no test or CI target needs it.
upstream-ccm:
	@bash hack/upstream-ccm/build.sh

lint: venv
	$(VENV)/bin/ruff check src tests examples bench
	$(VENV)/bin/ruff format --check src tests examples bench
	$(VENV)/bin/lint-imports

format: venv
	$(VENV)/bin/ruff format src tests examples bench
	$(VENV)/bin/ruff check --fix src tests examples bench

# mypy's incremental cache lives beside the Go builds' (hack/lib.sh's cache root), so a fresh
# clone (CI) checks only what changed: mypy re-hashes every file and re-checks the modules whose
# source or dependencies differ (about 1 CPU-s when nothing did, 37 with an empty cache).
KCCM_CACHE_ROOT := $(or $(KCCM_CACHE_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kccm)
typecheck: venv
	MYPY_CACHE_DIR=$(KCCM_CACHE_ROOT)/mypy $(VENV)/bin/mypy

# UNIT_MARKERS selects by marker, e.g. 'not helm' (make test runs the chart tests, which need
# the helm binary, after the Go builds).
UNIT_MARKERS ?=
unit: venv
	$(PY) -m pytest $(XDIST_UNIT) $(if $(UNIT_MARKERS),-m "$(UNIT_MARKERS)") tests/unit

integration: venv wheelhouse controlplane helm vcsim occm azure-upstream alibabacloud-upstream octavia-api
	$(PY) -m pytest $(XDIST_INTEGRATION) tests/conformance tests/integration

# The same layer in parts, for make test (hack/test.sh): the core needs only the control plane,
# helm and vcsim, so it runs while upstream's binaries still build; then each cloud whose tests
# run an upstream binary, as soon as its own builds are done.
UPSTREAM_CLOUD_TESTS := tests/integration/openstack tests/integration/azure \
	tests/integration/alibabacloud
integration-core: venv wheelhouse controlplane helm vcsim
	$(PY) -m pytest $(XDIST_INTEGRATION) tests/conformance tests/integration \
		$(addprefix --ignore=,$(UPSTREAM_CLOUD_TESTS))

integration-openstack: venv wheelhouse controlplane occm octavia-api
	$(PY) -m pytest $(XDIST_INTEGRATION) tests/integration/openstack

integration-azure: venv wheelhouse controlplane azure-upstream
	$(PY) -m pytest $(XDIST_INTEGRATION) tests/integration/azure

integration-alibabacloud: venv wheelhouse controlplane alibabacloud-upstream
	$(PY) -m pytest $(XDIST_INTEGRATION) tests/integration/alibabacloud

# Everything, timed step by step: the Go builds compile in the background while lint, types
# and the unit layer run (they need no Go binary); then conformance + integration.
test:
	@bash hack/test.sh

flake-hunt: venv wheelhouse controlplane helm vcsim occm azure-upstream alibabacloud-upstream octavia-api
	@bash hack/flake-hunt.sh

# The aws provider's whole suite against moto (kccm.emulators.aws: moto's server in a process
# of its own, dev extra).
test-aws: venv controlplane
	$(PY) -m pytest tests/unit/providers/aws tests/conformance/test_aws.py tests/integration/test_aws_*.py

# The vsphere provider's whole suite against vcsim (built from govmomi, see hack/vcsim).
test-vsphere: venv controlplane vcsim
	$(PY) -m pytest tests/unit/providers/vsphere tests/conformance/test_vsphere.py tests/integration/vsphere

demo: venv controlplane
	$(PY) -m kccm dev demo

# The newest supported Python: pyenv's 3.13.0 if installed, else python3.13 on PATH.
PY313 ?= $(firstword $(wildcard /root/.pyenv/versions/3.13.0/bin/python) $(shell command -v python3.13 2>/dev/null))
VENV313 ?= .venv313
STAMP313 := $(VENV313)/.installed-stamp

$(STAMP313): pyproject.toml
	@test -n "$(PY313)" || { echo "error: no Python 3.13 (python3.13 on PATH or /root/.pyenv/versions/3.13.0)" >&2; exit 1; }
	@echo "== creating $(VENV313) with $(PY313)"
	$(PY313) -m venv $(VENV313)
	$(VENV313)/bin/python -m pip install --quiet uv==$(UV_VERSION)
	$(VENV313)/bin/uv pip install --quiet --python $(VENV313)/bin/python -e '.[dev]' -e examples/external-provider
	@touch $@

# What the interpreter changes (asyncio, ssl, warnings, every provider's SDK through the
# conformance kit, the demo), not the whole unit layer twice: the runtime, the kube client
# (its transport and TLS), the call gate and provider contract, the clock, the conformance
# kit for every provider, the kube contract against the real apiserver, and the demo.
PY313_TESTS ?= tests/unit/runtime tests/unit/kube tests/unit/util tests/unit/cloudprovider \
	tests/unit/testing tests/unit/emulators tests/conformance \
	tests/integration/test_kube_contract.py \
	tests/integration/test_demo.py
venv313: $(STAMP313)

test-py313: $(STAMP313) controlplane vcsim
	$(VENV313)/bin/python -m pytest $(XDIST_INTEGRATION) $(PY313_TESTS)

clean:
	rm -rf $(VENV) $(VENV313) .mypy_cache .pytest_cache .ruff_cache

flags-doc: venv  ## regenerate docs/flags.md from the flag definitions
	$(PY) -m kccm --print-flags-markdown > docs/flags.md

# DEVELOPMENT.md's walk-throughs (add a controller, a setting, a provider method) followed
# literally in a scratch copy, each step left out once (hack/walkthroughs; several minutes).
walkthroughs: venv
	$(PY) hack/walkthroughs
