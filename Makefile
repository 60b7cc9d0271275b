# compact-host build targets. `make help` lists them.
GO ?= go

.PHONY: help build test check bench plugins examples

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build the compact-host binary into bin/
	$(GO) build -o bin/compact-host ./cmd/compact-host

test: ## run every test (the README's test command)
	$(GO) test ./... ./abi/... ./sdk/...

check: ## vet, race tests, wasm builds, tidy check
	$(GO) vet ./... ./abi/... ./sdk/...
	$(GO) test -race ./... ./abi/... ./sdk/...
