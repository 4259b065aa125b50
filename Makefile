# ratekeeper developer and CI targets. `make test` is what CI runs.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO ?= go

# Packages scanned for FuzzXxx targets (every package whose tests declare
# one, integration_test excepted). Each target found by `go test -list`
# runs for FUZZTIME: a count of executions, not a duration, because a
# duration races the fuzzing coordinator's own deadline in Go 1.26 and can
# fail a target that found nothing ("context deadline exceeded",
# go.dev/issue/75804).
FUZZ_PKGS ?= $(sort $(patsubst %/,%,$(dir $(shell grep -rl --include='*_test.go' '^func Fuzz' . 2>/dev/null | grep -v '^\./integration_test/'))))
FUZZTIME ?= 40000x

# Real-Redis tests: a local image built from the host's redis-server (no
# registry needed), testcontainers kept on loopback and without the reaper.
REDIS_IMAGE ?= ratekeeper/redis:local
export RATEKEEPER_REDIS_IMAGE ?= $(REDIS_IMAGE)
export TESTCONTAINERS_HOST_OVERRIDE ?= 127.0.0.1
export TESTCONTAINERS_RYUK_DISABLED ?= true
INTEGRATION_TIMEOUT ?= 5m
# UNIT_PARALLEL is how many parallel subtests of one package the root
# module's unit tests run at once (go test's default is GOMAXPROCS). The
# store conformance suites' subtests mostly wait on real time (periods,
# blocks, TTLs), so on a 2-core machine the Redis store's tests took about
# 330 s under the race detector at 2 and about 220 s at 4.
UNIT_PARALLEL ?= 4
# The conformance suite's subtests run in parallel and mostly sleep (Redis
# keeps real time), so they may outnumber the cores.
INTEGRATION_PARALLEL ?= 16
# When set, the integration run's -v output is also written to this file
# (.ci/run checks it for skipped tests).
INTEGRATION_LOG ?=

STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

# Integrations in modules of their own (each with a replace of the root),
# so that the root module's graph holds neither gRPC nor OpenTelemetry, and
# the example service that serves gRPC too. The root's ./... does not
# descend into them: their tests, vet, staticcheck and tidiness are run
# here one module at a time.
MODULES := middleware/grpc metrics/otel examples/grpc

# LINT_GOOS: the other systems every module must build and vet on (lint),
# so that a contributor on macOS or Windows can build and run the tests.
LINT_GOOS ?= darwin windows

BENCH ?= .
BENCHTIME ?= 1s

.PHONY: help setup run run-chi run-grpc test test-unit test-fuzz test-integration bench bench-compare redis-image lint fmt plots docs

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

setup: ## install the Debian packages the tests need, when missing
	scripts/setup.sh

run: ## run the net/http example service
	$(GO) run ./examples/stdlib

run-chi: ## run the chi example service
	$(GO) run ./examples/chi

run-grpc: ## run the example service with gRPC on GRPC_ADDR (default :9090) too, under the same policies
	cd examples/grpc && GRPC_ADDR=$${GRPC_ADDR:-:9090} $(GO) run .

test: setup lint test-unit test-fuzz test-integration ## set up, lint, then unit tests, short fuzz runs, real-Redis tests

test-unit: ## unit tests with the race detector, root module, the benchmark module's harness and MODULES
	$(GO) test -race -shuffle=on -vet=all -parallel $(UNIT_PARALLEL) ./...
	cd bench && $(GO) test -race -shuffle=on -vet=all ./...
	@for m in $(MODULES); do \
		echo "cd $$m && $(GO) test -race -shuffle=on -vet=all ./..."; \
		(cd $$m && $(GO) test -race -shuffle=on -vet=all ./...) || exit 1; \
	done

test-fuzz: ## run every FuzzXxx target for FUZZTIME executions
	@for pkg in $(FUZZ_PKGS); do \
		list="$$($(GO) test -list '^Fuzz' "$$pkg")"; \
		for target in $$(printf '%s\n' "$$list" | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) "$$pkg"; \
		done; \
	done

test-integration: ## real-Redis tests in integration_test/ (needs Docker), benchmarks run once
	@if [ "$(RATEKEEPER_REDIS_IMAGE)" = "$(REDIS_IMAGE)" ] && docker info >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory redis-image; \
	fi
	cd integration_test && $(GO) test -race -shuffle=on -vet=all -count=1 -v \
		-timeout $(INTEGRATION_TIMEOUT) -parallel $(INTEGRATION_PARALLEL) \
		-bench . -benchtime 1x ./... \
		$(if $(INTEGRATION_LOG),2>&1 | tee $(abspath $(INTEGRATION_LOG)))

bench: ## benchmarks: root module, the Redis store and middleware on real Redis, then MODULES
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) ./...
	cd integration_test && $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) ./...
	@for m in $(MODULES); do \
		(cd $$m && $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) ./...) || exit 1; \
	done

bench-compare: setup ## ratekeeper beside other Go limiters on a private redis-server (bench/, BENCHMARKS.md); flags via BENCH_FLAGS
	cd bench && $(GO) run ./cmd/compare $(BENCH_FLAGS)

redis-image: setup ## build the local Redis image from /usr/bin/redis-server (idempotent)
	scripts/build-redis-image.sh $(REDIS_IMAGE)

lint: ## gofmt must report nothing; go vet and staticcheck in every module, vet for LINT_GOOS too; integration_test/go.mod and MODULES tidy
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd integration_test && $(GO) vet ./...
	cd bench && $(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	cd integration_test && $(GO) run $(STATICCHECK) ./...
	@cd integration_test && $(GO) mod tidy -diff || { echo "integration_test/go.mod is not tidy: run (cd integration_test && go mod tidy)"; exit 1; }
	@for os in $(LINT_GOOS); do \
		for m in . integration_test bench $(MODULES); do \
			echo "cd $$m && GOOS=$$os go vet ./..."; \
			(cd $$m && GOOS=$$os $(GO) vet ./...) || exit 1; \
		done; \
	done
	@for m in $(MODULES); do \
		echo "cd $$m && vet, staticcheck, tidy"; \
		(cd $$m && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...) || exit 1; \
		(cd $$m && $(GO) mod tidy -diff) || { echo "$$m/go.mod is not tidy: run (cd $$m && go mod tidy)"; exit 1; }; \
	done

plots: ## draw docs/algorithms.svg: every algorithm under the same traffic, on a simulated clock (cmd/plots)
	$(GO) run ./cmd/plots -o docs/algorithms.svg

docs: ## copy every snippet of README.md and docs/*.md from its source (internal/doccheck); review the diff
	$(GO) test ./internal/doccheck -run 'TestSnippets' -count=1 -update

fmt: ## gofmt every Go file
	gofmt -w .
