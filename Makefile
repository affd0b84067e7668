# Targets: test (default), test-valkey, lint, bench, example, chaos, sim. CI runs .ci/run, which calls lint, test,
# chaos-smoke and test-valkey.

GO ?= go

# staticcheck v0.7.0 is the newest release that builds with Go 1.25, the release go.mod
# names; later ones need Go >= 1.26. Override with `make lint STATICCHECK_VERSION=...`.
STATICCHECK_VERSION ?= v0.7.0
GOBIN_DIR := $(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin
STATICCHECK := $(GOBIN_DIR)/staticcheck
# gocyclo bounds the cyclomatic complexity of the library's own functions (the root package
# and core; not tests, tools or examples) at 15: each stays readable against its contract.
GOCYCLO_VERSION ?= v0.6.0
GOCYCLO := $(GOBIN_DIR)/gocyclo
CYCLO_FILES := $(filter-out %_test.go,$(wildcard *.go core/*.go))

.DEFAULT_GOAL := test
.PHONY: test test-valkey lint bench bench-compare example staticcheck-install gocyclo-install chaos chaos-smoke sim

# The adapters under contrib/ are modules of their own, so that their dependencies never
# enter go.mod: test and lint run in each too.
CONTRIB := $(patsubst %/go.mod,%,$(wildcard contrib/*/go.mod))
# Examples that need a dependency the main module does not take (a SQL driver, in
# examples/fencing/sql) are modules of their own too: test and lint run in each.
EXAMPLE_MODULES := $(patsubst %/go.mod,%,$(wildcard examples/*/go.mod examples/*/*/go.mod))

# Every package runs with the race detector, through .ci/race-test, which runs a package
# again once only if the race detector's own runtime crashed and no test failed (see
# there). The allocation bounds are exact without the race detector (under it, sync.Pool
# drops a share of what it is given), so those tests run once more without it.
RACE_TEST := $(CURDIR)/.ci/race-test
# Packages tested at once: most of the suite's time is real servers answering and timeouts
# running out, not CPU (a whole run uses about 0.8 of one core), so more packages than
# cores run at once; each package's own tests still run one after another.
TEST_PACKAGES_AT_ONCE ?= 6
# The modules of contrib/ and examples/ run beside the main module's packages (their
# output follows the main module's); the test fails if any of them fails. So does the
# simulation without the race detector, over SIM_TEST_SEEDS seeds: under it, a seed costs
# eight times the CPU, so TestSim runs a dozen seeds there (see internal/sim's defaultSeeds).
SIM_TEST_SEEDS ?= 144
test:
	@mkdir -p bench/bin
	@(for m in $(CONTRIB) $(EXAMPLE_MODULES); do \
		echo "cd $$m && $(RACE_TEST) $(GO) ./..."; \
		(cd $$m && $(RACE_TEST) $(GO) ./...) || exit 1; \
	done; \
	echo "$(GO) test -count=1 -run '^TestSim$$' ./internal/sim -seeds $(SIM_TEST_SEEDS)"; \
	$(GO) test -count=1 -run '^TestSim$$' ./internal/sim -seeds $(SIM_TEST_SEEDS)) >bench/bin/test-modules.log 2>&1 & modules=$$!; \
	status=0; \
	echo "$(RACE_TEST) $(GO) -p $(TEST_PACKAGES_AT_ONCE) ./..."; \
	$(RACE_TEST) $(GO) -p $(TEST_PACKAGES_AT_ONCE) ./... || status=1; \
	echo "$(GO) test -count=1 -run Allocations ./core ./backends/goredis"; \
	$(GO) test -count=1 -run Allocations ./core ./backends/goredis || status=1; \
	wait $$modules || status=1; \
	cat bench/bin/test-modules.log; \
	exit $$status

# The real-server suites again on Valkey: the backends' tests, each of which runs the
# conformance suite over real servers, and the chaos smoke, with every server, cluster node
# and sentinel a valkey-server process (REDLOCK_TEST_SERVER, which internal/redistest and
# bench/chaos read). .ci/run installs valkey-server; here it must be on PATH. The package
# conformance itself (which proves that its checks catch faulty nodes, whatever the server)
# runs on redis-server only, to keep CI short; so do the suite's checks on miniredis
# (-skip), which `make test` has run already.
VALKEY_TEST_PACKAGES ?= ./backends/goredis ./backends/redigo ./backends/rueidis ./backends/valkey
test-valkey:
	@command -v valkey-server >/dev/null 2>&1 || { echo "make test-valkey: valkey-server is not on PATH (.ci/run installs it)"; exit 1; }
	@valkey-server --version
	REDLOCK_TEST_SERVER=valkey-server $(RACE_TEST) $(GO) -p $(TEST_PACKAGES_AT_ONCE) -skip '/^miniredis$$' $(VALKEY_TEST_PACKAGES)
	REDLOCK_TEST_SERVER=valkey-server $(MAKE) --no-print-directory chaos-smoke

lint: staticcheck-install gocyclo-install
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then \
		echo "gofmt: these files need formatting (run gofmt -w on them):"; \
		echo "$$unformatted"; \
		exit 1; \
	fi
	$(GO) mod tidy -diff
	$(GO) vet ./...
	$(STATICCHECK) ./...
	$(GOCYCLO) -over 15 $(CYCLO_FILES)
	@for m in $(CONTRIB) $(EXAMPLE_MODULES); do \
		echo "cd $$m && $(GO) mod tidy -diff && $(GO) vet ./... && staticcheck ./..."; \
		(cd $$m && $(GO) mod tidy -diff && $(GO) vet ./... && $(STATICCHECK) ./...) || exit 1; \
	done
	cd bench && $(GO) mod tidy -diff

# Installs the pinned staticcheck into $(GOBIN_DIR) unless that exact version is there.
staticcheck-install:
	@if ! "$(STATICCHECK)" -version 2>/dev/null | grep -qF "($(STATICCHECK_VERSION))"; then \
		echo "installing staticcheck $(STATICCHECK_VERSION) into $(GOBIN_DIR)"; \
		GOBIN="$(GOBIN_DIR)" $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); \
	fi

# Installs the pinned gocyclo into $(GOBIN_DIR) unless it is there. gocyclo has no version
# flag: the module's version is read from the binary's build info.
gocyclo-install:
	@if ! $(GO) version -m "$(GOCYCLO)" 2>/dev/null | grep -q "github.com/fzipp/gocyclo[[:space:]]*$(GOCYCLO_VERSION)"; then \
		echo "installing gocyclo $(GOCYCLO_VERSION) into $(GOBIN_DIR)"; \
		GOBIN="$(GOBIN_DIR)" $(GO) install github.com/fzipp/gocyclo/cmd/gocyclo@$(GOCYCLO_VERSION); \
	fi

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# bench/ is its own module, so the libraries it compares against never enter go.mod. It
# waits up to 10 minutes for the load average to fall below 1; BENCH_ARGS="-maxload 0"
# skips the wait. Results: bench/results.txt.
bench-compare:
	cd bench && $(GO) run . -maxload 1.0 $(BENCH_ARGS)

example:
	$(GO) run ./examples/quickstart

# The fault-injection checker (bench/chaos, in the bench module): every nemesis for 20 s over
# go-redis by default; e.g. CHAOS_ARGS="-nemesis partition -duration 5s -backend rueidis".
# It exits non-zero if it finds a violation. See docs/chaos.md.
chaos:
	cd bench && $(GO) run ./chaos $(CHAOS_ARGS)

# A short run of the checker for CI: every nemesis for 2 s over each backend (about 30 s
# each, mostly waiting: the backends run at once), failing on any violation (or a
# watchdog). The output goes to bench/bin/ and is printed only when the run fails; the
# summary tables always.
CHAOS_SMOKE_BACKENDS ?= goredis redigo rueidis
chaos-smoke:
	@mkdir -p bench/bin
	cd bench && $(GO) build -o bin/chaos ./chaos
	@pids=""; for b in $(CHAOS_SMOKE_BACKENDS); do \
		echo "chaos smoke: $$b, every nemesis, 2 s each"; \
		bench/bin/chaos -backend $$b -duration 2s -trace=false >bench/bin/chaos-$$b.log 2>&1 & pids="$$pids $$!"; \
	done; \
	status=0; set -- $$pids; \
	for b in $(CHAOS_SMOKE_BACKENDS); do \
		if wait $$1; then \
			echo "chaos smoke: $$b"; sed -n '/^## summary/,$$p' bench/bin/chaos-$$b.log; \
		else \
			cat bench/bin/chaos-$$b.log; echo "chaos smoke: $$b failed (exit status above; full output in bench/bin/chaos-$$b.log)"; status=1; \
		fi; \
		shift; \
	done; \
	exit $$status

# The deterministic simulation (internal/sim) over SEEDS seeds from FIRST, each a seeded
# fault schedule in virtual time: `make sim SEEDS=100000` soaks. A failing seed prints its
# trace and the command that replays it.
SEEDS ?= 10000
FIRST ?= 0
sim:
	$(GO) test ./internal/sim -run Sim -count=1 -timeout 0 -seeds $(SEEDS) -first $(FIRST)
