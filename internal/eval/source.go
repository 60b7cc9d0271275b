package eval

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/process"
	"github.com/compact-host/compact-host/host/plugin/wasm"
	"github.com/compact-host/compact-host/plugins/narrative"
	"github.com/compact-host/compact-host/plugins/structured"
	"github.com/compact-host/compact-host/plugins/truncate"
	"github.com/compact-host/compact-host/sdk"
)

// linked are the built-in plugins linked into the binary.
var linked = map[string]func() *sdk.Plugin{
	structured.Name: structured.New,
	narrative.Name:  narrative.New,
	truncate.Name:   truncate.New,
}

// source finds strategies: the registry, or the linked built-ins.
type source struct {
	reg       *plugin.Registry
	owned     bool
	inProcess bool
}

func newSource(ctx context.Context, opts Options) (*source, error) {
	s := &source{reg: opts.Registry, inProcess: opts.InProcess}
	if s.reg == nil {
		reg, err := plugin.NewRegistry(ctx, plugin.Options{Wasm: wasm.Runtime, Builtins: wasm.Builtins, Process: process.Runtime, NoWatch: true})
		if err != nil {
			return nil, fmt.Errorf("eval: open plugin registry: %w", err)
		}
		s.reg, s.owned = reg, true
	}
	return s, nil
}

func (s *source) close() {
	if s.owned {
		s.reg.Close()
	}
}

// strategy loads the named strategy now, so that loading (a wasm
// compilation) is not counted in any compaction. A built-in the registry
// lacks (its wasm module not built) runs in process, and the info says so.
func (s *source) strategy(ctx context.Context, name string) (host.Strategy, StrategyInfo, error) {
	info := StrategyInfo{Name: name}
	inProcess := func(note string) (host.Strategy, StrategyInfo, error) {
		sp := linked[name]()
		info.Transport, info.Version, info.Note, info.LoadMillis = string(plugin.SourceInProcess), sp.Version, note, 0
		return plugin.InProcess(sp, plugin.Options{}), info, nil
	}
	if _, ok := linked[name]; ok && s.inProcess {
		return inProcess("")
	}
	began := time.Now()
	p, err := s.reg.Strategy(ctx, name)
	info.LoadMillis = millis(time.Since(began))
	if err != nil {
		if _, ok := linked[name]; ok && errors.Is(err, plugin.ErrNotFound) {
			return inProcess("no wasm module of this built-in in the registry; run in process")
		}
		return nil, info, err
	}
	info.Transport, info.Path, info.Version = string(p.Source()), p.Path(), p.Info().Version
	return p, info, nil
}

// truncators resolves tool-output truncators as the strategies are: the
// registry, or the linked truncate plugin when running in process.
func (s *source) truncators(ctx context.Context) host.TruncatorResolver {
	if s.inProcess {
		p := plugin.InProcess(truncate.New(), plugin.Options{})
		return func(string) (host.Truncator, error) { return p, nil }
	}
	return func(category string) (host.Truncator, error) {
		p, err := s.reg.Truncator(ctx, category)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
