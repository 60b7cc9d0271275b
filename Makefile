# compact-host build targets. `make help` lists them.
GO ?= go

.PHONY: help build test check tidy bench plugins examples clients

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build the compact-host binary into bin/
	$(GO) build -o bin/compact-host ./cmd/compact-host

# abi and sdk are modules of their own (a plugin build never pulls the
# host's dependencies); go.work lets one go test run over the three.
MODULES := . abi sdk
PACKAGES := ./... ./abi/... ./sdk/...

# Node packages the tests and examples drive, each pinned by a
# package-lock.json: the proxy's and the clients' tests, Gemini CLI, the real agents
# (Claude Code, Codex CLI) internal/realagent resumes session files with,
# the AssemblyScript examples' compiler.
NPM_TEST_DIRS := internal/proxy/testdata/node internal/proxy/testdata/geminicli clients/typescript internal/realagent/testdata internal/realagent/testdata/opencode
NPM_STAMPS := $(addsuffix /node_modules/.package-lock.json,$(NPM_TEST_DIRS))

# go test through internal/testsummary: go test's own terse output, then
# every skipped test with its reason, then "N passed, N failed, N
# skipped". TEST_FLAGS adds go test flags (make test TEST_FLAGS=-short).
TEST_FLAGS ?=
test: $(NPM_STAMPS) ## run every test of every module and of the clients (the README's test command)
	GO=$(GO) $(GO) run ./internal/testsummary $(TEST_FLAGS) $(PACKAGES)
	@$(MAKE) --no-print-directory clients

# npm ci rewrites node_modules/.package-lock.json: a stamp of the lock
# file. Without npm the tests that need the packages skip and say so.
%/node_modules/.package-lock.json: %/package-lock.json
	@if command -v npm >/dev/null; then \
		echo "cd $* && npm ci --no-audit --no-fund"; \
		cd $* && npm ci --no-audit --no-fund; \
	else \
		echo "npm is not installed: the tests that use $* skip; install Node.js 20 with npm, then run: cd $* && npm ci --no-audit --no-fund" >&2; \
	fi

# The clients of the HTTP API (clients/python: standard library only;
# clients/typescript: fetch, with typescript from npm to compile it) run
# their tests against a live `compact-host serve` and `proxy` of bin/.
TS_CLIENT := clients/typescript

clients: build $(TS_CLIENT)/node_modules/.package-lock.json ## test the Python and TypeScript clients against a live serve
	cd clients/python && COMPACT_HOST_BIN=$(CURDIR)/bin/compact-host python3 -m unittest test_compact_host_client.py
	cd $(TS_CLIENT) && COMPACT_HOST_BIN=$(CURDIR)/bin/compact-host npm test --silent

check: plugins tidy vet race ## vet, race tests, tidy modules, and embedded plugins matching their sources
	@git diff --quiet -- $(BUILTIN_DIR) || { echo "embedded plugins differ from their sources: commit $(BUILTIN_DIR)"; exit 1; }

.PHONY: vet race
vet: ## go vet every package of every module
	$(GO) vet $(PACKAGES)

# The race detector runs on every package but these, whose tests take
# minutes under it and whose code runs on one goroutine or is raced
# through the packages it calls: the CLI (cmd/compact-host's scripts,
# internal/cli), the importers (host/formats), the corpus replays
# (internal/eval), the conformance kit (raced through host/plugin), the
# example and built-in plugins (wasm guests), the pi comparison, and the
# real agents (internal/realagent: its time is the agents' own processes,
# six minutes without the detector; the proxy and readers it drives are
# raced in their own packages). A new package is raced unless it is named
# here. RATIONALE.md ("The test
# suite's time") has the times.
RACE_EXCLUDED := cmd/compact-host internal/cli internal/eval internal/realagent host/formats% host/plugintest examples% plugins% bench%
RACE_PACKAGES = $(filter-out $(addprefix $(MODULE_PATH)/,$(RACE_EXCLUDED)),$(shell $(GO) list $(PACKAGES)))

# Its packages include the ones that drive Node packages (the proxy's
# SDK tests, the real agents), so it installs them as make test does.
race: $(NPM_STAMPS) ## run the tests of RACE_PACKAGES under the race detector
	GO=$(GO) $(GO) run ./internal/testsummary -race $(RACE_PACKAGES)

# go mod tidy ignores go.work (golang/go#50750), and the go.mod files
# carry no replace (go install ...@version refuses one): each module is
# tidied against a copy of its go.mod that points the project's other
# modules at their directories, as go.work does.
MODULE_PATH := github.com/compact-host/compact-host
tidy: ## fail if a go.mod or go.sum is not what go mod tidy writes; make tidy TIDY=write fixes them
	@for m in $(MODULES); do \
		tmp=$$(mktemp -d) && cp $$m/go.mod $$tmp/ && { [ ! -f $$m/go.sum ] || cp $$m/go.sum $$tmp/; } || exit 1; \
		others=""; for o in $(filter-out .,$(MODULES)); do [ "$$o" = "$$m" ] || others="$$others $$o"; done; \
		for o in $$others; do $(GO) mod edit -modfile=$$tmp/go.mod -replace=$(MODULE_PATH)/$$o=$(CURDIR)/$$o || exit 1; done; \
		if [ "$(TIDY)" = write ]; then \
			(cd $$m && GOWORK=off $(GO) mod tidy -modfile=$$tmp/go.mod) || exit 1; \
			for o in $$others; do $(GO) mod edit -modfile=$$tmp/go.mod -dropreplace=$(MODULE_PATH)/$$o || exit 1; done; \
			cp $$tmp/go.mod $$m/go.mod && { [ ! -f $$tmp/go.sum ] || cp $$tmp/go.sum $$m/go.sum; } || exit 1; \
		else \
			(cd $$m && GOWORK=off $(GO) mod tidy -diff -modfile=$$tmp/go.mod) || { rm -rf $$tmp; echo "tidy: $$m is not tidy: make tidy TIDY=write"; exit 1; }; \
		fi; \
		rm -rf $$tmp; \
	done

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

# Examples: the C plugins are built on the C SDK (sdk/c) with Debian's clang,
# lld and wasi-libc (apt-get install -y clang lld wasi-libc
# libclang-rt-14-dev-wasm32); their .wasm files are committed so the tests
# run without them. The process plugin is an ordinary Go binary.
C_TRUNCATOR := examples/c-truncator
C_STRATEGY := examples/c-strategy
C_SDK := sdk/c
# The AssemblyScript examples build with the compiler their package-lock.json
# pins (npm ci in examples/assemblyscript) against sdk/assemblyscript.
AS_EXAMPLES := examples/assemblyscript
WASI_CC ?= clang --target=wasm32-wasi --sysroot=/usr -O2 -mexec-model=reactor -Wall -Wextra -Wl,--strip-all

# clang runs wasm-opt over what it links whenever one is on PATH (Debian's
# binaryen), and the modules then differ from the committed ones: the build
# stops rather than write them.
examples: $(AS_EXAMPLES)/node_modules/.package-lock.json ## build the example plugins (C, AssemblyScript, Go process) into examples/
	@! command -v wasm-opt >/dev/null || { echo "examples: clang would run $$(command -v wasm-opt) over the C modules, which then differ from the committed ones; build where binaryen's wasm-opt is not on PATH" >&2; exit 1; }
	$(WASI_CC) -I$(C_SDK) -o $(C_TRUNCATOR)/logdedup.wasm $(C_TRUNCATOR)/src/logdedup.c $(C_SDK)/compact_host.c
	$(WASI_CC) -I$(C_SDK) -o $(C_STRATEGY)/outline.wasm $(C_STRATEGY)/src/outline.c $(C_SDK)/compact_host.c
	cd $(AS_EXAMPLES) && npx --no-install asc truncator.ts -o headtail.wasm --config asconfig.json
	cd $(AS_EXAMPLES) && npx --no-install asc strategy.ts -o digest.wasm --config asconfig.json
	$(GO) build -o examples/process-strategy/bullet ./examples/process-strategy

# The Python examples (examples/python) need no build: they run with
# /usr/bin/python3 and Debian's python3-grpcio.
# Every example plugin of every SDK, as `compact-host plugins verify` takes
# them: a .wasm file or a process plugin's manifest.
EXAMPLE_PLUGINS := $(C_TRUNCATOR)/logdedup.wasm $(C_STRATEGY)/outline.wasm \
	$(AS_EXAMPLES)/headtail.wasm $(AS_EXAMPLES)/digest.wasm \
	examples/process-strategy/bullet.plugin.json \
	examples/python/loglines.plugin.json examples/python/recap.plugin.json

.PHONY: verify-examples
verify-examples: build ## run `compact-host plugins verify` on every example plugin (after make examples)
	@for p in $(EXAMPLE_PLUGINS); do \
		echo "compact-host plugins verify $$p"; \
		bin/compact-host plugins verify $$p || exit 1; \
	done

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
# bench/pi/package-lock.json): installs pi only when asked (and only when
# the lock changed), never in CI, then prints compact-host's and pi's
# append, cut and load on every session of ../shared/corpus and
# ../shared/corpus-new and on a synthetic one of 10,000 messages, with
# their ratios, all from one run. BENCH_PI_MIN is the least time per
# measurement; BENCH_PI_FLAGS passes more flags (-wall, -keep N,
# -corpus DIR,DIR, -synthetic N).
BENCH_PI_MIN ?= 1s
BENCH_PI_FLAGS ?=

.PHONY: bench-pi
bench-pi: bench/pi/node_modules/.package-lock.json ## compare compact-host with pi (installed from npm into bench/pi) on the corpus
	$(GO) run ./bench/pi/compare -min $(BENCH_PI_MIN) $(BENCH_PI_FLAGS)

bench/pi/node_modules/.package-lock.json: bench/pi/package-lock.json
	cd bench/pi && npm ci --no-audit --no-fund --ignore-scripts
