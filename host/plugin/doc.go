// Package plugin loads and calls compact-host plugins: summarization
// strategies and tool-output truncators that run as wasm modules (wazero),
// as separate processes (hashicorp/go-plugin), or linked in-process, behind
// one ABI (package abi, specified in abi/README.md).
//
// The runtimes are wired in through Options, so this package links
// neither wazero nor go-plugin and gRPC: package host/plugin/wasm runs
// wasm plugins and embeds the built-ins, package host/plugin/process runs
// process plugins, and package host/plugin/inprocess links the built-ins
// as Go code for an agent that needs no plugins directory. The engine
// finds plugins through a Registry and calls them with the Services of the
// engine that calls:
//
//	reg, err := plugin.NewRegistry(ctx, plugin.Options{Logger: logger,
//		Wasm: wasm.Runtime, Builtins: wasm.Builtins, Process: process.Runtime})
//	...
//	defer reg.Close()
//	strategy, err := reg.Strategy(ctx, "structured")
//	resp, err := strategy.Summarize(ctx, services, &abi.SummarizeRequest{...})
//	switch {
//	case errors.Is(err, plugin.ErrDeadlineExceeded), errors.Is(err, plugin.ErrTrap): // fall back
//	}
//	trunc, err := reg.Truncator(ctx, "head-tail")
//	out, err := trunc.Truncate(ctx, services, &abi.TruncateRequest{...})
//
// A Registry holds the built-in plugins embedded in the binary (loaded on
// first use; Options.Builtins) and the plugins of a directory (Options.PluginsDir, else
// $COMPACT_HOST_PLUGINS_DIR, else os.UserConfigDir()/compact-host/plugins):
// "*.wasm" files and "*.plugin.json" process manifests. The directory is
// watched: a dropped-in or replaced file (for a process plugin, its manifest
// or an executable in the directory) is loaded without a restart, a
// removed one is closed. A user plugin with a built-in's name takes its
// place. A plugin that fails to load is reported by List and in the log,
// and skipped. Every wasm plugin, built-in or not, is stopped at its call's
// deadline (see RATIONALE.md, ABI).
//
// Process plugins are trusted code that runs as the user; wasm plugins are
// sandboxed (README.md, Trust model). Either way every call has a deadline,
// at most Options.MaxCompletionsPerCall model completions (max_tokens
// clamped to Options.MaxCompletionTokens and an OutputLimiter's limit) and a
// bounded log; only regular files of at most Options.MaxFileBytes are read
// from the plugins directory. A process plugin's Info is cached by the
// content hash of its files, so a known one starts at its first use.
//
// Every failure is an *Error whose Kind (ErrTrap, ErrMemoryLimit, ...)
// says what happened, naming the plugin and its path. A failed call never
// modifies the request; the engine falls back and the session is
// untouched. A *Plugin is safe for concurrent use.
//
// Package host/plugintest checks a plugin against the contract
// (`compact-host plugins verify PATH`).
package plugin
