# compact-host build targets. `make help` lists them.
GO ?= go

.PHONY: help build test check bench plugins examples

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build the compact-host binary into bin/
	$(GO) build -o bin/compact-host ./cmd/compact-host

# abi and sdk are modules of their own (a plugin build never pulls the
# host's dependencies), so every Go command runs once per module.
MODULES := . abi sdk

test: ## run every test of every module (the README's test command)
	@for m in $(MODULES); do (cd $$m && $(GO) test ./...) || exit 1; done

check: plugins ## vet, race tests, tidy modules, and embedded plugins matching their sources
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./... && $(GO) mod tidy -diff) || exit 1; done
	@for m in $(MODULES); do (cd $$m && $(GO) test -race ./...) || exit 1; done
	@git diff --quiet -- $(BUILTIN_DIR) || { echo "embedded plugins differ from their sources: commit $(BUILTIN_DIR)"; exit 1; }

# Built-in plugins: each plugins/<name>/cmd/<name> becomes an embedded wasm
# module. The outputs are committed (see RATIONALE.md).
.PHONY: hostile
BUILTIN_DIR := host/internal/builtin/wasm
WASM_BUILD := GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -ldflags='-s -w'

plugins: ## build plugins/*/cmd/* into host/internal/builtin/wasm/<name>.wasm
	@for dir in plugins/*/cmd/*/; do \
		name=$$(basename $$dir); \
		echo "$(WASM_BUILD) -o $(BUILTIN_DIR)/$$name.wasm ./$$dir"; \
		$(WASM_BUILD) -o $(BUILTIN_DIR)/$$name.wasm ./$$dir || exit 1; \
	done

# Hostile test plugins: hand-written WAT assembled with wat2wasm (Debian
# package wabt); the outputs are committed beside their sources.
HOSTILE_DIR := host/internal/wasmrt/testdata

hostile: ## assemble the hostile test plugins (needs wat2wasm from wabt)
	@for f in $(HOSTILE_DIR)/*.wat; do \
		echo "wat2wasm $$f -o $${f%.wat}.wasm"; \
		wat2wasm $$f -o $${f%.wat}.wasm || exit 1; \
	done

# Examples: the C truncator is built with Debian's clang, lld and wasi-libc
# (apt-get install -y clang lld wasi-libc); its .wasm is committed so the
# tests run without them. The process plugin is an ordinary Go binary.
C_TRUNCATOR := examples/c-truncator
WASI_CC ?= clang --target=wasm32-wasi --sysroot=/usr -O2 -mexec-model=reactor -Wall -Wextra -Wl,--strip-all

examples: ## build examples/c-truncator/logdedup.wasm and examples/process-strategy/bullet
	$(WASI_CC) -o $(C_TRUNCATOR)/logdedup.wasm $(C_TRUNCATOR)/src/logdedup.c
	$(GO) build -o examples/process-strategy/bullet ./examples/process-strategy

# Benchmarks of the frame codec (abi, its own module), the engine (host/), the plugin runtimes (host/plugin,
# host/internal/...), the truncators (plugins/...), the importers
# (host/formats) and the corpus replays (internal/eval), printed as
# `go test -bench` prints them so that benchstat reads them:
#   make bench > old.txt; (change); make bench > new.txt; benchstat old.txt new.txt
# A copy of the output goes to $(BENCH_OUT), which git ignores (*.out).
# A corpus replay takes seconds, so internal/eval runs BENCH_EVAL_TIME
# iterations per count. benchstat wants 6 or more runs for its confidence
# intervals: make bench BENCH_COUNT=6 (about 8 minutes on 2 cores; 3 take 4).
BENCH_COUNT ?= 3
BENCH_TIME ?= 1s
BENCH_EVAL_TIME ?= 1x
BENCH_OUT ?= bench.out
BENCH_PKGS := ./host/ ./host/plugin/ ./host/internal/... ./host/formats/ ./plugins/...

bench: ## run the Go benchmarks in benchstat's format (BENCH_COUNT=3), copied to bench.out
	@rm -f $(BENCH_OUT)
	@cd abi && $(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) -benchtime $(BENCH_TIME) . 2>&1 | tee -a ../$(BENCH_OUT)
	@$(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) -benchtime $(BENCH_TIME) $(BENCH_PKGS) 2>&1 | tee -a $(BENCH_OUT)
	@$(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) -benchtime $(BENCH_EVAL_TIME) ./internal/eval/ 2>&1 | tee -a $(BENCH_OUT)
	@! grep -Eq '^(FAIL|--- FAIL|panic:)' $(BENCH_OUT) || { echo "bench: a benchmark failed; see $(BENCH_OUT)" >&2; exit 1; }

# Side by side with pi (npm @mariozechner/pi-coding-agent, pinned in
# bench/pi/package-lock.json): installs pi only when asked, never in CI,
# then prints compact-host's and pi's append, cut and load on the corpus
# (../shared/corpus) with their ratios. BENCH_PI_MIN is the least time per
# measurement; BENCH_PI_FLAGS passes more flags (-wall, -keep N).
BENCH_PI_MIN ?= 1s
BENCH_PI_FLAGS ?=

.PHONY: bench-pi
bench-pi: ## install pi from npm into bench/pi and compare it with compact-host on the corpus
	cd bench/pi && npm ci --no-audit --no-fund --ignore-scripts
	$(GO) run ./bench/pi/compare -min $(BENCH_PI_MIN) $(BENCH_PI_FLAGS)
