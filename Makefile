# raystep's public make targets. Operators' scripts call these; keep each
# working and idempotent.
SHELL := /bin/bash
GO ?= go
PYTHON ?= python3
VENV ?= .venv
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
# BIN is where `make build` writes its binaries. They are static (no cgo, so
# no ELF interpreter and no libc): one file that runs on any Linux of the
# same architecture, in a scratch container too.
BIN ?= bin
STATIC_BUILD := CGO_ENABLED=0 $(GO) build -trimpath

.PHONY: build venv wheels demo sandbox k8s-bins test test-full test-go test-python test-compile vet

## build: compile the static binaries $(BIN)/raystep and $(BIN)/pipes-conformance
build:
	$(STATIC_BUILD) -ldflags '$(LDFLAGS)' -o $(BIN)/raystep ./cmd/raystep
	$(STATIC_BUILD) -ldflags '-s -w' -o $(BIN)/pipes-conformance ./dagster_integration/pipes/cmd/pipes-conformance

## venv: create .venv with the pinned Python packages (Ray, Dagster, pytest)
venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt $(wildcard dagster_integration/pyproject.toml)
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements.txt
	@if [ -f dagster_integration/pyproject.toml ]; then \
		$(VENV)/bin/pip install --quiet -e dagster_integration; fi
	touch $@

## wheels: dagster-raystep's sdist and a wheel per platform (linux and macOS,
## x86_64 and arm64) with its raystep binary inside, into $(DIST); the version
## is the git tag's. WHEEL_TARGETS="linux/amd64" builds fewer.
DIST ?= dist
WHEEL_TARGETS ?=
wheels: venv
	$(VENV)/bin/python tools/wheels.py --dist $(DIST) $(foreach t,$(WHEEL_TARGETS),--target $(t))

## demo: set up everything, then train the example model on a private local Ray head
demo: venv build
	bin/raystep run -f examples/ads_ranking/train.yaml

## k8s-bins: build the real Kubernetes test binaries (API server, controller
## manager, scheduler, etcd, kwok) into a versioned cache, once per machine
k8s-bins:
	test/k8s/build.sh >/dev/null

## sandbox: a local Kubernetes with fake GPU nodes, the KubeRay operator and a
## Ray head, until Ctrl-C; prints a directory with a kubeconfig and an env file
# Built, then run, rather than `go run`, which does not pass signals on:
# SIGTERM to make reaches the sandbox, which stops everything it started.
sandbox: venv k8s-bins
	$(GO) build -o $(BIN)/sandbox ./test/cluster/sandbox
	$(BIN)/sandbox $(SANDBOX_ARGS)

vet:
	$(GO) vet ./...

# TEST_OUT receives the records of a test run: go test's events (go.json),
# pytest's JUnit XML (pytest.xml), and one line per Ray head and Kubernetes
# control plane the tests started (events). `make test` ends with a report
# made from them (test/suite/report.py): time per package, the slowest
# tests, heads and control planes per package (and, with --names, every
# test's name: .ci/run prints them).
TEST_OUT ?= out/test
# SUITE runs its command around the session's two shared Ray heads and
# counts every head started meanwhile (test/suite).
SUITE = $(GO) run ./test/suite -events $(TEST_OUT)/events --
GO_TEST_TIMEOUT ?= 30m
# GO_UNIT_TIMEOUT bounds each unit package, whose whole run takes under
# five minutes under -race on a busy 2-core machine: a hung test fails
# its package (naming the test, in the report's last lines) long before
# the e2e packages' bound would.
GO_UNIT_TIMEOUT ?= 10m

# E2E_PKGS drive real components from outside: the built binary against
# real Ray (test/e2e), the runner against a real API server and KubeRay
# operator (runner/kuberay/e2e, test/cluster). They run without the race
# detector (test/e2e's raystep binary is built with it): the Go code they
# exercise in-process is raystep's, whose unit packages run with it, and
# the KubeRay operator and controllers they host in-process cost about
# 1.6 times the CPU under -race (TestStepSucceeds, TestRayJobFails and
# TestCancel: 119 CPU-s with -race, 75 without) on a machine whose two
# cores are the suite's limit.
#
# The three run side by side (-p; its default, the number of cores, runs
# two). test/cluster, the shortest, used to start only once one of the
# others ended, and then ran alone: its tests wait on kwok's pod stages
# and Kueue, and one of the two cores sat idle for the suite's last two
# minutes (process accounting over a whole CI run).
E2E_PKGS = ./test/e2e ./runner/kuberay/e2e ./test/cluster
E2E_PARALLEL = 3
UNIT_PKGS = $(filter-out $(E2E_PKGS:./%=$(MODULE)/%),$(shell $(GO) list ./...))
MODULE = github.com/raystep/raystep

# test-compile compiles every package test-go's binaries are made of, with
# the flags test-go uses, and links none: .ci/run warms Go's build cache
# with it while it installs the rest. Linking ahead would be wasted: Go
# does not cache test executables, so go test links them again anyway.
test-compile:
	$(GO) list -race -export -test -deps $(UNIT_PKGS) >/dev/null
	$(GO) list -export -test -deps $(E2E_PKGS) >/dev/null

# go test runs with -vet=off: the go vet ./... before it runs every analyzer
# go test's own vet would (a subset) on the same packages and their tests.
# go test's vet is configured apart from go vet's, so it vets every
# dependency again for its facts: 2,342 vet processes and 88 CPU-s in a run
# on a new machine (process accounting), for no check go vet left undone.
test-go: venv build k8s-bins
	@mkdir -p $(TEST_OUT)
	$(GO) vet ./...
	@rc=0; set -o pipefail; \
	$(GO) test -race -vet=off -count=1 -timeout $(GO_UNIT_TIMEOUT) -json $(UNIT_PKGS) | \
		$(PYTHON) test/suite/report.py --stream $(TEST_OUT)/go-unit.json || rc=1; \
	$(GO) test -vet=off -count=1 -p $(E2E_PARALLEL) -timeout $(GO_TEST_TIMEOUT) -json $(E2E_PKGS) | \
		$(PYTHON) test/suite/report.py --stream $(TEST_OUT)/go-e2e.json || rc=1; \
	exit $$rc
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime 15s -fuzzminimizetime 2s ./schemas

# PYTHON_SRC is the Python that ruff checks; mypy is strict on dagster_raystep
# (its settings are in dagster_integration/pyproject.toml).
PYTHON_SRC := dagster_integration examples tools test

test-python: venv build
	@mkdir -p $(TEST_OUT)
	$(VENV)/bin/ruff check $(PYTHON_SRC)
	$(VENV)/bin/ruff format --check $(PYTHON_SRC)
	cd dagster_integration && $(abspath $(VENV))/bin/mypy
	$(VENV)/bin/pytest -q -rA --durations=30 --junitxml=$(abspath $(TEST_OUT))/pytest.xml dagster_integration/tests \
		$(if $(PYTEST_LOG),>$(PYTEST_LOG) 2>&1)

## test: every test, Go and Python, around two shared Ray heads; ends with a
## report of where the time went and how many Ray heads were started
#
# go test and pytest run side by side: each leaves the CPU idle while it
# waits on Ray jobs, Dagster runs and the API server, and the other fills
# those gaps. go test's lines stream; pytest's go to $(TEST_OUT)/pytest.log,
# printed whole when both are done.
test: venv build k8s-bins
	@rm -rf $(TEST_OUT) && mkdir -p $(TEST_OUT)
	@echo "pytest runs beside go test; its output: $(TEST_OUT)/pytest.log"
	@rc=0; $(SUITE) $(MAKE) --no-print-directory -k -j2 test-go test-python \
		PYTEST_LOG=$(abspath $(TEST_OUT))/pytest.log || rc=$$?; \
		echo "== pytest ($(TEST_OUT)/pytest.log)"; cat $(TEST_OUT)/pytest.log 2>/dev/null; \
		$(PYTHON) test/suite/report.py --out $(TEST_OUT); exit $$rc

## test-full: make test with every cell of the tests' signal × phase
## matrices, where make test runs a sample that changes with each commit
test-full:
	RAYSTEP_TEST_FULL=1 $(MAKE) --no-print-directory test
