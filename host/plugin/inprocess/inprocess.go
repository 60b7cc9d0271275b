// Package inprocess links plugins into the host as Go code: Builtins are
// the built-in strategies and truncators (structured, narrative, truncate)
// without wasm, without processes and without a plugins directory, so an
// agent that embeds the engine links neither wazero nor go-plugin and
// gRPC. A Set is what host.WithPlugins takes:
//
//	eng, err := host.New(cfg, host.WithPlugins(inprocess.Builtins(plugin.Options{})))
//
// The plugins are the code the embedded wasm built-ins are built from,
// called directly: every call still has its deadline and limits on model
// completions, and a panic is recovered, but nothing is sandboxed. For the
// plugins directory as well (wasm and process plugins, reloaded when they
// change), build a plugin.Registry with the runtimes of packages
// host/plugin/wasm and host/plugin/process instead.
package inprocess

import (
	"context"
	"fmt"
	"slices"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/plugins/narrative"
	"github.com/compact-host/compact-host/plugins/structured"
	"github.com/compact-host/compact-host/plugins/truncate"
	sdk "github.com/compact-host/compact-host/sdk/core"
)

// Set is a fixed set of plugins linked into the host, found by name and
// by output category as a plugin.Registry finds its plugins. It is safe
// for concurrent use.
type Set struct {
	plugins []*plugin.Plugin
}

// New links plugins into the host under the limits of opts (its call
// timeout, completion limits and logger; the registry's options do not
// apply). Lookups try them in the order given.
func New(opts plugin.Options, plugins ...*sdk.Plugin) *Set {
	s := &Set{}
	for _, p := range plugins {
		s.plugins = append(s.plugins, plugin.InProcess(p, opts))
	}
	return s
}

// Builtins are the built-in plugins, in process, in the order a Registry
// tries its embedded ones: narrative, structured, truncate.
func Builtins(opts plugin.Options) *Set {
	return New(opts, narrative.New(), structured.New(), truncate.New())
}

// Strategy returns the strategy called name, or an error wrapping
// plugin.ErrNotFound.
func (s *Set) Strategy(_ context.Context, name string) (*plugin.Plugin, error) {
	for _, p := range s.plugins {
		if p.Name() == name && p.Info().Has(abi.KindStrategy) {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: no strategy %q", plugin.ErrNotFound, name)
}

// Truncator returns the first truncator that declares category, or an
// error wrapping plugin.ErrNotFound.
func (s *Set) Truncator(_ context.Context, category string) (*plugin.Plugin, error) {
	for _, p := range s.plugins {
		if info := p.Info(); info.Has(abi.KindTruncator) && slices.Contains(info.Categories, category) {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: no truncator for category %q", plugin.ErrNotFound, category)
}

// Plugins returns the plugins of the set, in lookup order.
func (s *Set) Plugins() []*plugin.Plugin { return slices.Clone(s.plugins) }
