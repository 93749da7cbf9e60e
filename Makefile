# The workbook's commands. `make help` lists them.
#
# Every module listed in go.work is tested by `make test`; a stage's own
# target (`make stage01`, `make stage02`, ...) tests only that stage.

SHELL := /bin/bash
GO    ?= go

# The modules of the workspace, in course order, read from go.work.
MODULES := $(shell sed -n 's|^[[:space:]]*\./\([A-Za-z0-9_.-]*\).*|\1|p' go.work)

# Race detector everywhere: most stages are concurrent, and the cost on the
# sequential ones is small.
TESTFLAGS ?= -race -count=1 -timeout 15m
BENCHFLAGS ?= -run '^$$' -benchmem -count=1

.PHONY: help run test lint vet fmt bench fuzz faults images deps-test deps-kcat deps-images $(MODULES:%=test-%) \
	stage01 stage02 stage03 stage04 stage05 stage06 final

help:
	@echo "make run       the course's main demo: a three-broker cluster replicating (stage 03)"
	@echo "make test      lint, then every stage's tests (sets up what is missing first)"
	@echo "make stageNN   one stage's tests, e.g. make stage01"
	@echo "make final     the final broker's tests (the compatibility suite, security, metrics)"
	@echo "make lint      gofmt and go vet over every module (for Linux and macOS)"
	@echo "make bench     every stage's benchmarks"
	@echo "make fuzz      run each fuzz target for FUZZTIME (default 2m)"
	@echo "make faults    the long randomized fault suite (SEED=, FAULTS= or DURATION=, KINDS=)"
	@echo "make images    build the container images (ZooKeeper, brokers)"

# Three brokers on 127.0.0.1:19092-19094 and the stage 03 controller: produce,
# move the leader, stop and restart a broker, show each replica's state.
# Drop -script for the interactive version.
RUN_SCRIPT ?= produce 5; wait; state; leader 0 1; produce 3; wait; state; stop 1; start 1; produce 2; wait; state
run:
	$(GO) run ./stage03-replication/cmd/cluster -script "$(RUN_SCRIPT)"

test: deps-test lint $(MODULES:%=test-%)

# What the tests need on the machine beyond Go: kcat from stage 02 on, the
# container images from stage 05 on.
deps-test: deps-kcat deps-images

deps-kcat:
	@if [ -d stage02-reactor ]; then ./scripts/deps.sh kcat; fi

deps-images:
	@if [ -d stage05-controller ]; then $(MAKE) --no-print-directory images; fi

$(MODULES:%=test-%): test-%:
	cd $* && $(GO) test $(TESTFLAGS) ./...

stage01: stage-stage01-log
stage02: deps-kcat stage-stage02-reactor
stage03: stage-stage03-replication
stage04: stage-stage04-isr-acks
stage05: deps-images deps-kcat stage-stage05-controller
stage06: stage-stage06-performance
final: deps-test stage-final

# A stage's tests, or a clear word that the stage is not built yet.
stage-%:
	@if [ -f $*/go.mod ]; then $(MAKE) --no-print-directory test-$*; \
	else echo "$* is planned, not built yet (see README.md)"; exit 1; fi

lint: fmt vet

fmt:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# Every module is vetted for macOS too (cross-compiled: its tests must build
# with the portable server there), so that Linux CI keeps a Mac reader's
# `make stageNN` working.
#
# And a layering rule (STYLE.md): the replica package, a domain package,
# must not import stage 02's broker, an assembly package that also builds
# the network server; the partition store lives in a package both use.
vet:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) vet ./... && GOOS=darwin $(GO) vet ./...); done
	@if [ -d stage03-replication ]; then \
		deps=$$(cd stage03-replication && $(GO) list -deps ./replica) || exit 1; \
		if grep -qx 'github.com/kafkaworkbook/workbook/stage02-reactor/broker' <<<"$$deps"; then \
			echo "stage03-replication/replica imports stage02-reactor/broker: keep it to stage 02's store, protocol and network"; exit 1; \
		fi; \
	fi

bench:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) test $(BENCHFLAGS) -bench . ./...); done

FUZZTIME ?= 2m
# The log's fuzz targets write and fsync files on every input: on a RAM disk
# they run a thousand times faster than on ext4.
FUZZ_TMPDIR ?= $(shell [ -d /dev/shm ] && echo /dev/shm || echo /tmp)
fuzz:
	@export TMPDIR=$(FUZZ_TMPDIR); set -e; for m in $(MODULES); do \
		for pkg in $$(cd $$m && $(GO) list ./...); do \
			for f in $$(cd $$m && $(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
				echo "== $$pkg $$f"; (cd $$m && $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg); \
			done; \
		done; \
	done

# The fault suite's long run (final/faults): faults drawn at random with
# SEED (a new one, printed, when empty), FAULTS of them or as many as fit
# in DURATION (default 10m), from KINDS (comma-separated; default all).
# The report is printed and saved to final/faults/report-<seed>.md, or
# FAULTS_REPORT. `make test` runs only the short, fixed version.
SEED ?=
FAULTS ?=
DURATION ?=
KINDS ?=
faults: deps-images
	cd final && FAULTS_LONG=1 FAULTS_SEED=$(SEED) FAULTS_COUNT=$(FAULTS) FAULTS_DURATION=$(DURATION) FAULTS_KINDS=$(KINDS) \
		$(GO) test -race -count=1 -timeout 3h -v -run '^TestFaultsRandom$$' ./faults

images:
	./scripts/images.sh
