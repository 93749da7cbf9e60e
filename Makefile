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

.PHONY: help run run-stage03 cluster cluster-down test lint vet fmt mod bench bench-cluster fuzz faults soak images deps-test deps-kcat deps-images deps-compose $(MODULES:%=test-%) \
	exercises check exercises-verify hint solution break exercise-stats doctor \
	stage01 stage02 stage03 stage04 stage05 stage06 final

help:
	@echo "make run       the course's main demo: the final cluster in containers, a leader killed, nothing lost"
	@echo "make cluster   start 3 ZooKeeper, 3 brokers and Prometheus in containers, in the background"
	@echo "make cluster-down  remove that cluster (containers, network, volumes)"
	@echo "make test      lint, then every stage's tests (sets up what is missing first)"
	@echo "make stageNN   one stage's tests, e.g. make stage01"
	@echo "make final     the final broker's tests (the compatibility suite, security, metrics)"
	@echo "make lint      gofmt, go vet (for Linux and macOS) and go mod tidy -diff over every module"
	@echo "make bench     every stage's benchmarks"
	@echo "make bench-cluster  the final cluster's speed in containers: throughput and latency (about 15 min)"
	@echo "make fuzz      run each fuzz target for FUZZTIME (default 2m)"
	@echo "make faults    the long randomized fault suite (SEED=, FAULTS= or DURATION=, KINDS=)"
	@echo "make soak      stage 04's soak: leader churn, ISR changes, long polls, idempotent produce (SOAK_DURATION=10m)"
	@echo "make images    build the container images (ZooKeeper, brokers)"
	@echo "make doctor    checks Go, git, kcat, Docker and the images, and says what to install"
	@echo "make exercises DIR=../my-workbook STAGES=01 [TRACK=build] [FROM=../old-copy]"
	@echo "               a learner's copy: those stages' tasks blank (fill track: exercises; build track: whole functions)"
	@echo "make check STAGE=01 | EX=01.3   in a learner's copy: which tasks pass (no STAGE: every stage)"
	@echo "make hint EX=01.3 [LEVEL=2]     a task's hints, level 1 to 3;  make solution EX=01.3: the reference's code"
	@echo "make break EX=04.b1 [RUN=1]     a break-it task: predict, then run its tests with the code broken"

# The final cluster in containers (final/cmd/cluster demo): 3 ZooKeeper
# servers, 3 brokers, Prometheus; a producer and a consumer through the kill
# of a partition leader; then the cluster stays up until Ctrl-C. Without a
# Docker engine: what to install, then stage 03's in-process demo.
CLUSTER_FLAGS ?=
run:
	@if docker info >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory images && $(GO) run ./final/cmd/cluster $(CLUSTER_FLAGS) demo; \
	else \
		echo "make run: no Docker engine here (docker info failed). The final cluster runs in containers:"; \
		echo "  install Docker Engine (https://docs.docker.com/engine/install/) and start it, then make run again."; \
		echo "Meanwhile, stage 03's demo: three in-process brokers replicating on 127.0.0.1."; \
		$(MAKE) --no-print-directory run-stage03; \
	fi

# Stage 03's demo: three brokers on 127.0.0.1:19092-19094 and the stage 03
# controller: produce, move the leader, stop and restart a broker, show each
# replica's state. Drop -script for the interactive version.
RUN_SCRIPT ?= produce 5; wait; state; leader 0 1; produce 3; wait; state; stop 1; start 1; produce 2; wait; state
run-stage03:
	$(GO) run ./stage03-replication/cmd/cluster -script "$(RUN_SCRIPT)"

# The same cluster without the demo, in the background: brokers on
# 127.0.0.1:9092-9094, Prometheus on 127.0.0.1:9090.
cluster: images
	$(GO) run ./final/cmd/cluster $(CLUSTER_FLAGS) up

cluster-down:
	$(GO) run ./final/cmd/cluster $(CLUSTER_FLAGS) down

test: deps-test lint $(MODULES:%=test-%) exercises-verify

# What the tests need on the machine beyond Go: kcat from stage 02 on, the
# container images from stage 05 on, docker-compose for the final Compose
# file (final/deploy).
deps-test: deps-kcat deps-images deps-compose

deps-kcat:
	@if [ -d stage02-reactor ]; then ./scripts/deps.sh kcat; fi

deps-compose:
	@if [ -d final/deploy ]; then ./scripts/deps.sh docker-compose; fi

deps-images:
	@if [ -d stage05-controller ]; then $(MAKE) --no-print-directory images; fi

# final's packages run one at a time: several of them start a cluster of
# containers (three ZooKeeper JVMs and three brokers), and two at once on a
# 2-core machine turn timeouts into flakes.
$(MODULES:%=test-%): test-%:
	cd $* && $(GO) test $(TESTFLAGS) $(if $(filter final,$*),-p 1) ./...

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

lint: fmt vet mod

# Every module's go.mod is true on its own, not only inside the workspace:
# it requires (and replaces with ../stageNN) each lower stage it imports,
# its direct dependencies are not marked indirect, and go.sum is complete,
# so that `GOWORK=off go build ./...` works in any module, as it does for a
# reader who copies one stage out. `go mod tidy -diff` prints what tidy
# would change, and fails if anything.
mod:
	@set -e; for m in $(MODULES); do \
		if ! out=$$(cd $$m && GOWORK=off $(GO) mod tidy -diff 2>&1); then \
			echo "$$m/go.mod is not tidy outside the workspace (fix: cd $$m && GOWORK=off go mod tidy):"; echo "$$out"; exit 1; \
		fi; \
	done

fmt:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# Every module is vetted for macOS too (cross-compiled: its tests must build
# with the portable server there), so that Linux CI keeps a Mac reader's
# `make stageNN` working.
#
# And a layering rule (the stages' layering, chapter 3): the replica package, a domain package,
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

# Exercise mode (tools/exercises; docs/09-tools.md): a learner's copy of
# the workbook in which the chosen stages' tasks are blank (each panics with
# its name) and everything else is solved; the stages' own tests grade it.
# Two tracks: fill (the chapters' "Your turn" exercises, a few statements
# each) and build (the "Build it" tasks, whole functions behind their
# signatures, and the exercises outside them). The copy is a git repository
# whose first commit is the baseline; FROM= brings a learner's earlier copy's
# work along. exercises-verify is the check `make test` runs on the
# reference: every task's tests exist (they pass: make test runs every
# stage's tests), each task blanked alone fails one of them, and each stage
# with all its tasks blanked compiles, on both tracks.
# In a learner's copy (.exercises.json) it points to make check.
DIR ?=
STAGES ?=
STAGE ?=
TRACK ?=
FROM ?=
EX ?=
LEVEL ?= 1
exercises:
	@if [ -z "$(DIR)" ]; then echo "make exercises DIR=../my-workbook [STAGES=01,02] [TRACK=fill|build] [FROM=../old-copy]: DIR is the learner's copy to write (new or empty)"; exit 2; fi
	$(GO) run ./tools/exercises write -dir $(DIR) $(if $(STAGES),-stages $(STAGES)) $(if $(TRACK),-track $(TRACK)) $(if $(FROM),-from $(FROM))

check:
	$(GO) run ./tools/exercises check $(if $(STAGE),-stage $(STAGE)) $(if $(EX),-ex $(EX))

hint:
	@$(GO) run ./tools/exercises hint -ex "$(EX)" -level $(LEVEL)

solution:
	@$(GO) run ./tools/exercises solution -ex "$(EX)"

# A break-it task (chapters' "Break it"): make break EX=04.b1 shows its
# question and its broken variant; RUN=1 runs its tests with the variant in
# place (an overlay: nothing in the tree changes).
RUN ?=
break:
	@$(GO) run ./tools/exercises break -ex "$(EX)" $(if $(RUN),-run)

exercise-stats:
	@$(GO) run ./tools/exercises stats $(if $(STAGES),-stages $(STAGES))

doctor:
	@./scripts/doctor.sh

exercises-verify:
	@if [ -f .exercises.json ]; then echo "exercises-verify: this is a learner's copy (.exercises.json); make check STAGE=NN grades it"; \
	else $(GO) run ./tools/exercises verify -list-reference; fi

bench:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) test $(BENCHFLAGS) -bench . ./...); done

# The final broker's cluster in containers (final/cluster), measured by
# final/cmd/clusterbench: RF3 acks=all throughput with our producer and
# franz-go's, latency at 10,000 records/s, each against its RF1 acks=1
# baseline, and where the CPU went. It starts its own cluster and removes
# it; CLUSTERBENCH_FLAGS="--cluster kafkaworkbook" measures `make
# cluster`'s instead. Under flock where there is one, so that two clusters
# never share the machine.
CLUSTERBENCH_FLAGS ?= --rounds 3
CLUSTER_LOCK ?= $(if $(shell command -v flock),flock /tmp/cluster.lock)
bench-cluster: deps-images
	$(CLUSTER_LOCK) $(GO) run ./final/cmd/clusterbench $(CLUSTERBENCH_FLAGS)

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

# The soak (stage 04's TestSoak): leader churn on every replica, ISR
# shrinks and expansions, parked long polls and an idempotent acks=all
# producer at once, under the race detector, for SOAK_DURATION (default
# 10m), then every record checked once and in order; a stall of 30 s fails
# it with every goroutine's stack. SOAK_SEED replays a run's choices.
# `make test` runs it for 15 seconds.
SOAK_DURATION ?= 10m
SOAK_SEED ?=
soak:
	cd stage04-isr-acks && SOAK_DURATION=$(SOAK_DURATION) $(if $(SOAK_SEED),SOAK_SEED=$(SOAK_SEED)) \
		$(GO) test -race -count=1 -v -run '^TestSoak$$' -timeout 60m ./cluster/

# The fault suite's long run (final/faults): faults drawn at random with
# SEED (a new one, printed, when empty), FAULTS of them or as many as fit
# in DURATION (default 10m), from KINDS (comma-separated; default all).
# The report is printed and saved to final/faults/report-<seed>.md, or
# FAULTS_REPORT, with its figure beside it (.png: each fault's longest
# wait for an acknowledgement). `make test` runs only the short, fixed
# version.
SEED ?=
FAULTS ?=
DURATION ?=
KINDS ?=
faults: deps-images
	cd final && FAULTS_LONG=1 FAULTS_SEED=$(SEED) FAULTS_COUNT=$(FAULTS) FAULTS_DURATION=$(DURATION) FAULTS_KINDS=$(KINDS) \
		$(GO) test -race -count=1 -timeout 3h -v -run '^TestFaultsRandom$$' ./faults

images:
	./scripts/images.sh
