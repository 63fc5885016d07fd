# kccm developer targets. CI runs `make test` (see .ci/run); README names `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: help venv controlplane helm lint format typecheck unit integration test test-aws demo clean

help:
	@echo "make demo          the local provider end to end: control plane, 3 nodes, kccm, a LoadBalancer"
	@echo "make test          lint, types, unit and integration tests (builds the control plane)"
	@echo "make controlplane  build etcd + kube-apiserver from Go modules (cached)"
	@echo "make helm          build helm from Go modules (cached; the chart tests use it)"
	@echo "make test-aws      the aws provider's tests (unit, conformance, daemon e2e) against moto"
	@echo "make lint | format | typecheck | unit | integration"

$(STAMP): pyproject.toml
	@echo "== creating $(VENV) and installing kccm with dev tools"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip install --quiet -e examples/external-provider
	@touch $@

venv: $(STAMP)

controlplane:
	@bash hack/controlplane/build.sh

helm:
	@bash hack/helm/build.sh

lint: venv
	$(VENV)/bin/ruff check src tests examples bench
	$(VENV)/bin/ruff format --check src tests examples bench
	$(VENV)/bin/lint-imports

format: venv
	$(VENV)/bin/ruff format src tests examples bench
	$(VENV)/bin/ruff check --fix src tests examples bench

typecheck: venv
	$(VENV)/bin/mypy

unit: venv
	$(PY) -m pytest tests/unit

integration: venv controlplane
	$(PY) -m pytest tests/integration

test: lint typecheck controlplane helm
	$(PY) -m pytest

# The aws provider's whole suite: moto runs in-process as a real HTTP server (dev extra).
test-aws: venv controlplane
	$(PY) -m pytest tests/unit/providers/aws tests/conformance/test_aws.py tests/integration/test_aws_daemon.py

demo: venv controlplane
	$(PY) -m kccm dev demo

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache

flags-doc: venv  ## regenerate docs/flags.md from the flag definitions
	$(PY) -m kccm --print-flags-markdown > docs/flags.md
