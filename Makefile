# raystep's public make targets. Operators' scripts call these; keep each
# working and idempotent.
SHELL := /bin/bash
GO ?= go
PYTHON ?= python3
VENV ?= .venv
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: build venv demo sandbox k8s-bins test test-go test-python vet

## build: compile bin/raystep and the Pipes conformance program
build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/raystep ./cmd/raystep
	@if [ -d dagster_integration/pipes/cmd/pipes-conformance ]; then \
		$(GO) build -trimpath -o bin/pipes-conformance ./dagster_integration/pipes/cmd/pipes-conformance; fi

## venv: create .venv with the pinned Python packages (Ray, Dagster, pytest)
venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt $(wildcard dagster_integration/pyproject.toml)
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements.txt
	@if [ -f dagster_integration/pyproject.toml ]; then \
		$(VENV)/bin/pip install --quiet -e dagster_integration; fi
	touch $@

## demo: set up everything, then train the example model on a private local Ray head
demo: venv build
	bin/raystep run -f examples/ads_ranking/train.yaml

## k8s-bins: build the real Kubernetes test binaries (API server, controller
## manager, scheduler, etcd, kwok) into a versioned cache, once per machine
k8s-bins:
	test/k8s/build.sh >/dev/null

## sandbox: a local Kubernetes with fake GPU nodes, the KubeRay operator and a
## Ray head, until Ctrl-C; prints a directory with a kubeconfig and an env file
sandbox: venv k8s-bins
	$(GO) run ./test/cluster/sandbox $(SANDBOX_ARGS)

vet:
	$(GO) vet ./...

test-go: venv build k8s-bins
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 25m ./...
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime 15s -fuzzminimizetime 2s ./schemas

test-python: venv build
	@if ls dagster_integration/tests/test_*.py >/dev/null 2>&1; then \
		$(VENV)/bin/pytest -q dagster_integration/tests; fi

## test: every test, Go and Python
test: test-go test-python
