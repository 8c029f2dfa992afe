# intentd: see README.md. `make run` and `make test` are all a new user needs.
GO        ?= go
BIN       := bin
PKGS      := ./...
TEST_FLAGS ?= -race -count=1 -timeout 20m

.PHONY: all build run test test-go canary test-unit test-integration jepsen jepsen-short jepsen-long fuzz bench vet fmt verify clean deps

all: build

deps:
	$(GO) mod download

build: deps
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/intentd ./cmd/intentd
	$(GO) build -o $(BIN)/intentctl ./cmd/intentctl
	$(GO) build -o $(BIN)/intent-bench ./cmd/intent-bench

## run: a local 3-node cluster on loopback (Ctrl-C stops it)
run: build
	./scripts/run-local.sh

## test: vet, gofmt check, unit + integration tests with -race, then the short fault profile
test: test-go canary jepsen-short

test-go: deps verify
	$(GO) test $(TEST_FLAGS) $(PKGS)

## canary: the agent-side gate: 200 episodes x 5 failure classes x 3 seeds, each seed twice (CANARY_ARGS adds flags)
CANARY_ARGS ?=
canary: deps
	$(GO) run ./cmd/canary $(CANARY_ARGS)

## jepsen: one fault run; pass flags with JEPSEN_ARGS="--nodes 5 --nemesis all --duration 5m --seed 7"
JEPSEN_ARGS ?=
jepsen: deps
	$(GO) run ./cmd/jepsen $(JEPSEN_ARGS)

## jepsen-short: the profile make test runs (no violation allowed; every seeded bug caught)
jepsen-short: deps
	./scripts/jepsen-short.sh

## jepsen-long: every nemesis, 5 nodes, several seeds
jepsen-long: deps
	./scripts/jepsen-long.sh

test-unit: deps
	$(GO) test $(TEST_FLAGS) ./fsm/... ./ledger/... ./httpapi/... ./client/... ./token/...

test-integration: deps
	$(GO) test $(TEST_FLAGS) ./cluster/... ./cmd/...

## fuzz: run every fuzz target for FUZZTIME each (default 30s)
FUZZTIME ?= 30s
fuzz: deps
	@for pkg in ./fsm ./httpapi ./token; do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

## bench: load generator against a fresh local 3-node cluster
bench: build
	./scripts/bench-local.sh

## bench-compare: intentd vs etcd 3.5 side by side; updates the README table (BENCH_QUICK=1: 1 rep, 3 s, no README)
## bench-fsm: heap bytes per intent, snapshot and restore of 1 M intents (Go benchmarks in fsm/)
.PHONY: bench-compare bench-fsm
BENCH_ARGS ?=
bench-compare:
	./scripts/bench-compare.sh $(BENCH_ARGS)

bench-fsm:
	$(GO) test -run '^$$' -bench '1M' -benchtime 1x -timeout 30m ./fsm/

verify: vet
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)
