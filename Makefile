# intentd: see README.md. `make run` and `make test` are all a new user needs.
GO        ?= go
BIN       := bin
PKGS      := ./...
TEST_FLAGS ?= -race -count=1 -timeout 20m

.PHONY: all build run test test-go test-sdk canary canary-proxy canary-mcp test-unit test-integration jepsen jepsen-short jepsen-storage jepsen-long jepsen-wan jepsen-soak fuzz bench vet fmt verify clean deps

all: build

deps:
	$(GO) mod download

build: deps
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/intentd ./cmd/intentd
	$(GO) build -o $(BIN)/intentctl ./cmd/intentctl
	cd bench && $(GO) build -o ../$(BIN)/intent-bench ./cmd/intent-bench
	$(GO) build -o $(BIN)/intent-proxy ./cmd/intent-proxy
	$(GO) build -o $(BIN)/intent-mcp ./cmd/intent-mcp

## run: a local 3-node cluster on loopback (Ctrl-C stops it)
run: build
	./scripts/run-local.sh

## test: vet, gofmt check, unit + integration tests with -race (the SDK conformance suite among them), the Python and TypeScript SDKs' own tests, canary, the compose test, then the short fault profile
test: test-go test-sdk canary compose-test jepsen-short

## test-sdk: the Python and TypeScript SDKs' unit tests (no cluster; their conformance runs in test-go, sdk/conformance)
test-sdk:
	python3 -m unittest discover -s sdk/python/tests
	sdk/typescript/test.sh

test-go: deps verify
	$(GO) test $(TEST_FLAGS) $(PKGS)
	cd bench && $(GO) test $(TEST_FLAGS) ./...
	$(GO) test -tags faults $(TEST_FLAGS) -run Parse ./internal/faults/ ./cmd/intentd/
	cd deploy && $(GO) test $(TEST_FLAGS) ./...

## canary: the agent-side gate: 200 episodes x 5 failure classes x 3 seeds, each seed twice (CANARY_ARGS adds flags); then seed 1 through intent-proxy (CANARY_PROXY_ARGS) and seed 1 through the MCP gate (CANARY_MCP_ARGS)
CANARY_ARGS ?=
CANARY_PROXY_ARGS ?= --seeds 1
CANARY_MCP_ARGS ?= --seeds 1
canary: deps
	$(GO) run ./cmd/canary $(CANARY_ARGS)
	$(GO) run ./cmd/canary --via http-proxy $(CANARY_PROXY_ARGS)
	$(GO) run ./cmd/canary --via mcp $(CANARY_MCP_ARGS)

## canary-proxy: the whole gate (3 seeds) with the tool a plain HTTP API behind intent-proxy (CANARY_ARGS adds flags)
canary-proxy: deps
	$(GO) run ./cmd/canary --via http-proxy $(CANARY_ARGS)

## canary-mcp: the whole gate (3 seeds) with the tool a plain MCP server behind the MCP gate (CANARY_ARGS adds flags)
canary-mcp: deps
	$(GO) run ./cmd/canary --via mcp $(CANARY_ARGS)

## jepsen: one fault run; pass flags with JEPSEN_ARGS="--nodes 5 --nemesis all --duration 5m --seed 7"
JEPSEN_ARGS ?=
jepsen: deps
	$(GO) run ./cmd/jepsen $(JEPSEN_ARGS)

## jepsen-short: the profile make test runs (no violation allowed; every seeded bug caught)
jepsen-short: deps
	./scripts/jepsen-short.sh

## jepsen-storage: storage faults on lazy filesystems (power loss of one node, the leader, a minority, every node; full disks; flipped bytes) in strict and ext4 mode, then the log-no-fsync control (about 5 min a seed; SEEDS="1 2 3 4 5")
jepsen-storage: deps
	./scripts/jepsen-storage.sh

## jepsen-long: every nemesis, 5 nodes, several seeds
jepsen-long: deps
	./scripts/jepsen-long.sh

## jepsen-wan: claim latency by region at RTTs of 30, 80 and 150 ms, local duplicate answers, failover of a lost leader region (about 15 min; knobs in scripts/jepsen-wan.sh)
jepsen-wan: deps
	./scripts/jepsen-wan.sh

## jepsen-soak: the bounded matrix (3/5 nodes x nemesis sets x workloads x lan/wan x seeds) and the controls under WAN; writes the aggregate table into docs/fault-testing.md (about 80 min; knobs in scripts/jepsen-soak.sh)
jepsen-soak: deps
	./scripts/jepsen-soak.sh

## test-unit: every package under -short: no cluster, no process, no network namespace (seconds)
test-unit: deps
	$(GO) test -short $(TEST_FLAGS) $(PKGS)

## test-integration: the tests -short skips too: in-process clusters on loopback TCP, real processes
test-integration: deps
	$(GO) test $(TEST_FLAGS) $(PKGS)

## fuzz: run every fuzz target for FUZZTIME each (default 30s)
FUZZTIME ?= 30s
fuzz: deps
	@for pkg in ./fsm ./httpapi ./token ./auth; do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

## console-screenshots: the web console's screenshots in docs/img, taken at 1280 px by its browser tests (needs chromium)
.PHONY: console-screenshots
console-screenshots: deps
	INTENTD_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/img $(GO) test -count=1 -run TestConsoleInABrowser ./console/

## bench: load generator against a fresh local 3-node cluster
bench: build
	./bench/scripts/bench-local.sh

## bench-compare: intentd vs etcd 3.5 side by side; updates the table in docs/benchmarks.md (BENCH_QUICK=1: 1 rep, 3 s, no table update)
## bench-fsm: heap bytes per intent, snapshot and restore of 1 M intents (Go benchmarks in fsm/)
.PHONY: bench-compare bench-fsm bench-sdk bench-proxy bench-mcp
BENCH_ARGS ?=
bench-compare:
	./bench/scripts/bench-compare.sh $(BENCH_ARGS)

bench-fsm:
	$(GO) test -run '^$$' -bench '1M' -benchtime 1x -timeout 30m ./fsm/

## bench-storm: a retry storm on one held key (STORM retriers of each of STORM_KINDS: naive, polite, divergent; each level HOLD long) beside 200 unrelated claims/s on a fresh local cluster, rate limits off so the ledger sees every retry; STORM_BIN=dir runs another build's intentd (docs/benchmarks.md)
.PHONY: bench-storm
STORM ?= 50,200,1000
HOLD ?= 10s
STORM_KINDS ?= naive,polite
STORM_BIN ?= $(BIN)
bench-storm: build
	BIN=$(STORM_BIN) INTENTD_RATE_LIMIT_KEY=0 INTENTD_RATE_LIMIT_CLIENT=0 INTENTD_RUN_DIR=$$(mktemp -d "$${TMPDIR:-/tmp}/intentd-storm.XXXXXX") \
		./scripts/run-local.sh --then $(BIN)/intent-bench --storm $(STORM) --storm-hold $(HOLD) --storm-kinds $(STORM_KINDS)

## bench-capacity: 3 nodes in 400 MiB memory cgroups (root, cgroup v1) filled with unique claims, this build vs BASE (776b00b): intents at the first 507 ledger_full, peak RSS, OOM kills, acked writes lost (LIMIT, FILL, CLIENTS, BUILDS, NEW_ARGS: e.g. --state-engine memory)
.PHONY: bench-capacity
bench-capacity:
	./bench/scripts/bench-capacity.sh

## bench-engines: the state machine's engines on a fresh local 3-node cluster each, alternating: BASE (4464307, the ledger in memory), this build with --state-engine memory and pebble; claims/s, p50/p99 of claim + complete and the ratios to BASE (LEVELS, REPS, DURATION, ENGINES; FILL_COUNT=N also fills to N intents through the API and reports RSS per node; BENCH_LOCK; docs/performance.md, issue 32)
.PHONY: bench-engines
bench-engines:
	./bench/scripts/bench-engines.sh

## bench-sdk: the Go, Python and TypeScript SDKs side by side on one local cluster (ROUNDS, DURATION, LEVELS)
bench-sdk: build
	./bench/scripts/bench-sdk.sh

## bench-proxy: intent-proxy's cost: an upstream straight, through the proxy, and the ledger's claim + complete (ROUNDS, DURATION, WARMUP, LEVELS; PROFILE=1 profiles the proxy)
bench-proxy: build
	./bench/scripts/bench-proxy.sh

## bench-mcp: the MCP gate's cost: a tool called directly and through intent-mcp, over stdio and streamable HTTP, and the ledger's claim + complete (ROUNDS, DURATION, WARMUP, CALLERS, TRANSPORTS; PROFILE=1 profiles the gate)
bench-mcp: build
	./bench/scripts/bench-mcp.sh

## bench-store: the state machine's apply workload on pebble (WAL on, off) and bbolt beside today's in-memory fsm, one process each, printing two Markdown tables (N, STEADY, READS, REPS, ENGINES; SCAN_FROM_START=1 adds pebble with unbounded index scans; docs/performance.md, issue 32)
.PHONY: bench-store
bench-store:
	./bench/scripts/bench-store.sh

## bench-state: the state machine on disk as built: the real Machine over pebble at each of SIZES retained intents (fill rate, RSS, disk, reads, snapshot, checkpoint, restore, restarts with and without a tail to replay) beside its in-memory store and the build before the change (BASE) at MEMORY_SIZES; each phase its own process (TAIL, READS; docs/performance.md, issue 32)
.PHONY: bench-state
bench-state:
	./bench/scripts/bench-state.sh

## verify: vet, the gofmt check, and the documentation checks: every relative Markdown link and
## anchor resolves inside the repository, every `make` target the docs name exists, and no file refers
## outside the repository (internal/doccheck; its cluster test runs with the other Go tests)
verify: vet
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) test -short -count=1 ./internal/doccheck/

## vet: the product build and the fault suite's build (-tags faults: seeded bugs compiled in), and the bench and deploy modules (they import this one through replace => ../)
vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags faults $(PKGS)
	cd bench && $(GO) vet ./...
	cd deploy && $(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)

## ---- operations: container image, compose cluster, dev certificates ----
.PHONY: image image-proxy up up-proxy down compose-test certs
IMAGE ?= intentd:local
PROXY_IMAGE ?= intent-proxy:local
CHARGE_API_IMAGE ?= charge-api:local
COMPOSE ?= docker-compose
COMPOSE_FILES := -f docker-compose.yml -f docker-compose.proxy.yml

## image: static binary built on the host (no registry), then a FROM scratch image
image: deps
	@mkdir -p $(BIN)/image
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BIN)/image/intentd ./cmd/intentd
	docker build -t $(IMAGE) .

## image-proxy: intent-proxy and the example upstream (examples/charge-api) as FROM scratch images, from static binaries built on the host
image-proxy: deps
	@mkdir -p $(BIN)/image
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BIN)/image/intent-proxy ./cmd/intent-proxy
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BIN)/image/charge-api ./examples/charge-api
	docker build -f deploy/image/intent-proxy.Dockerfile -t $(PROXY_IMAGE) .
	docker build -f deploy/image/charge-api.Dockerfile -t $(CHARGE_API_IMAGE) .

## up: a 3-container cluster (docker-compose.yml), HTTP on 127.0.0.1:8101-8103
up: image
	INTENTD_IMAGE=$(IMAGE) $(COMPOSE) up -d
	@echo "intentd: containers n1 n2 n3 starting; try: bin/intentctl cluster (after make build)"

## up-proxy: the cluster plus intent-proxy (127.0.0.1:8480) in front of an example API (127.0.0.1:9000): docker-compose.proxy.yml
up-proxy: image image-proxy
	INTENTD_IMAGE=$(IMAGE) INTENT_PROXY_IMAGE=$(PROXY_IMAGE) CHARGE_API_IMAGE=$(CHARGE_API_IMAGE) $(COMPOSE) $(COMPOSE_FILES) up -d
	@echo "intentd: n1 n2 n3, charge-api and intent-proxy starting; try the curl examples of docs/proxy.md#compose-example"

## down: stop the compose cluster (and the proxy example, if up) and delete its volumes
down:
	INTENTD_IMAGE=$(IMAGE) INTENT_PROXY_IMAGE=$(PROXY_IMAGE) CHARGE_API_IMAGE=$(CHARGE_API_IMAGE) $(COMPOSE) $(COMPOSE_FILES) down -v --remove-orphans

## compose-test: kill and restart a containerized leader, with a request and its replay through intent-proxy (skipped without a Docker engine)
compose-test:
	@if docker info >/dev/null 2>&1; then $(MAKE) --no-print-directory image image-proxy; fi
	INTENTD_IMAGE=$(IMAGE) INTENT_PROXY_IMAGE=$(PROXY_IMAGE) CHARGE_API_IMAGE=$(CHARGE_API_IMAGE) ./scripts/compose-test.sh

## certs: a development CA, node certificates n1-n3 and a client certificate in CERTS_DIR
CERTS_DIR ?= certs
CERTS_NODES ?= n1,n2,n3
certs: deps
	$(GO) run ./cmd/intentctl certs --dir $(CERTS_DIR) --nodes $(CERTS_NODES)
