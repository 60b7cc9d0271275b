// Package wasm runs compact-host plugins built to WebAssembly, with
// wazero, and holds the built-in plugins (structured, narrative, truncate)
// as wasm modules embedded in the binary, so that a fresh install works
// without a plugins directory. Package plugin links neither; wire them in
// through its Options:
//
//	reg, err := plugin.NewRegistry(ctx, plugin.Options{
//		Wasm: wasm.Runtime, Builtins: wasm.Builtins, Process: process.Runtime,
//	})
//
// Every wasm plugin, built-in or not, runs in its own sandbox under the
// same limits and is stopped at its call's deadline (RATIONALE.md, ABI).
package wasm

import (
	"context"

	"github.com/compact-host/compact-host/host/internal/builtin"
	"github.com/compact-host/compact-host/host/internal/pluginapi"
	"github.com/compact-host/compact-host/host/internal/wasmrt"
)

// Runtime is the wasm runtime: set plugin.Options.Wasm to it.
func Runtime(cfg pluginapi.WasmConfig) (pluginapi.WasmEngine, error) {
	e, err := wasmrt.NewEngine(wasmrt.Config{
		CacheDir:         cfg.CacheDir,
		MemoryLimitPages: uint32(cfg.MemoryLimitBytes / 65536),
		MaxOutputBytes:   cfg.MaxOutputBytes,
		MaxInstances:     cfg.MaxInstances,
		Logger:           cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	return Engine{e}, nil
}

// Engine is what Runtime makes: the engine that compiles and
// instantiates modules, as package plugin loads through it.
type Engine struct{ *wasmrt.Engine }

// Load implements pluginapi.WasmEngine.
func (e Engine) Load(ctx context.Context, path string, bin []byte) (pluginapi.Conn, error) {
	m, err := e.Engine.Load(ctx, path, bin)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Builtins are the built-in plugins, embedded as wasm modules built from
// plugins/*/cmd/* by `make plugins`: set plugin.Options.Builtins to it
// (with Options.Wasm, which runs them).
var Builtins pluginapi.Builtins = builtins{}

type builtins struct{}

func (builtins) Names() []string                 { return builtin.Names() }
func (builtins) Wasm(name string) ([]byte, bool) { return builtin.Wasm(name) }
