package plugin_test

import (
	"context"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/builtin"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/wasm"
	"github.com/compact-host/compact-host/host/plugintest"
	"github.com/compact-host/compact-host/internal/testwasm"
)

// The built-ins as the Registry runs them pass the conformance checks.
func TestRegistryBuiltinsConform(t *testing.T) {
	if len(builtin.Names()) == 0 {
		t.Skip("no built-in plugin is embedded yet (make plugins)")
	}
	cache, err := testwasm.ShareCompiled(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, err := plugin.NewRegistry(context.Background(), plugin.Options{PluginsDir: t.TempDir(), CacheDir: cache, NoWatch: true, Wasm: wasm.Runtime, Builtins: wasm.Builtins})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, e := range r.List(context.Background()) {
		t.Run(e.Name, func(t *testing.T) {
			if e.Err != nil {
				t.Fatal(e.Err)
			}
			var p *plugin.Plugin
			if e.Info.Has(abi.KindStrategy) {
				p, err = r.Strategy(context.Background(), e.Name)
			} else {
				p, err = r.Truncator(context.Background(), e.Info.Categories[0])
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Source() != plugin.SourceBuiltin {
				t.Fatalf("%s comes from %s", e.Name, p.Source())
			}
			plugintest.Run(t, p)
		})
	}
}
