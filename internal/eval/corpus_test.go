package eval

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/process"
	"github.com/compact-host/compact-host/host/plugin/wasm"
	"github.com/compact-host/compact-host/plugins/narrative"
	"github.com/compact-host/compact-host/plugins/structured"
	"github.com/compact-host/compact-host/plugins/truncate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// corpus returns the shared corpus sessions. They live beside the
// repository, not in it, so a checkout without them skips these tests
// and says why, as every other corpus test does.
func corpus(tb testing.TB) []string {
	tb.Helper()
	missing := tb.Skipf
	dir, err := CorpusDir()
	if err != nil {
		missing("the shared corpus is not checked out beside the repository (../shared/corpus): %v", err)
		return nil
	}
	files, err := CorpusSessions(dir)
	if err != nil || len(files) == 0 {
		missing("no sessions in %s: %v", dir, err)
		return nil
	}
	return files
}

// TestCorpusTruncate32k replays every corpus session at a 32k window with
// the truncate strategy, offline, as wasm: every gate must leave a valid
// context and every compaction name every file modified before its cut.
func TestCorpusTruncate32k(t *testing.T) {
	sessions := corpus(t)
	if testing.Short() {
		t.Skip("replays the whole corpus")
	}
	rep, err := Run(ctx, Options{Sessions: sessions, Windows: []int{32000}, Strategies: []string{"truncate"}, Progress: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != len(sessions) {
		t.Fatalf("%d runs for %d sessions", len(rep.Runs), len(sessions))
	}
	compactions := 0
	for _, r := range rep.Runs {
		if r.Err != "" {
			t.Errorf("%s: %s", r.Session, r.Err)
			continue
		}
		compactions += len(r.Compactions)
		if r.ValidGates != r.Gates || r.Gates != r.Calls {
			t.Errorf("%s: validity %d/%d gates (%d calls): %v", r.Session, r.ValidGates, r.Gates, r.Calls, r.Invalid)
		}
		if r.Recall.ModifiedNamed != r.Recall.Modified {
			t.Errorf("%s: modified-file recall %d/%d, not named: %v", r.Session, r.Recall.ModifiedNamed, r.Recall.Modified, r.Recall.MissingModified)
		}
	}
	// The corpus is several 32k windows long: a replay that never
	// compacts measures nothing.
	if compactions < 10 {
		t.Errorf("%d compactions over the corpus at 32k", compactions)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

// BenchmarkReplayLargest replays the largest corpus session at a 200k
// window, offline, per strategy and transport. ms/compaction is the
// engine's time per compaction (CompactionEvent.Duration, no model
// involved), host-ms/compaction the part outside the strategy: planning,
// verification, splicing. Target: ≤ 20 ms per compaction.
func BenchmarkReplayLargest(b *testing.B) {
	sessions := corpus(b)
	path := slices.MaxFunc(sessions, func(x, y string) int { return int(fileSize(x) - fileSize(y)) })
	s, err := formats.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	_, usage := account(ctx, s, filepath.Base(path))
	reg, err := plugin.NewRegistry(ctx, plugin.Options{Wasm: wasm.Runtime, Builtins: wasm.Builtins, Process: process.Runtime, NoWatch: true})
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	linkedPlugins := map[string]*plugin.Plugin{
		"structured": plugin.InProcess(structured.New(), plugin.Options{}),
		"narrative":  plugin.InProcess(narrative.New(), plugin.Options{}),
		"truncate":   plugin.InProcess(truncate.New(), plugin.Options{}),
	}
	for _, transport := range []string{"inprocess", "wasm"} {
		for _, name := range DefaultStrategies {
			var impl host.Strategy = linkedPlugins[name]
			if transport == "wasm" {
				p, err := reg.Strategy(ctx, name)
				if err != nil {
					b.Logf("no wasm %s: %v", name, err)
					continue
				}
				impl = p
			}
			b.Run(fmt.Sprintf("transport=%s/strategy=%s", transport, name), func(b *testing.B) {
				var compactions int
				var engine, hostPart float64
				b.ReportAllocs()
				for b.Loop() {
					r := replay(ctx, replayConfig{session: s, name: filepath.Base(path), window: 200_000, strategy: name, impl: impl, usage: usage})
					if r.Err != "" || len(r.Compactions) == 0 {
						b.Fatalf("%s: %d compactions", r.Err, len(r.Compactions))
					}
					for _, c := range r.Compactions {
						compactions++
						engine += c.EngineMillis
						hostPart += c.HostMillis
					}
				}
				b.ReportMetric(engine/float64(compactions), "ms/compaction")
				b.ReportMetric(hostPart/float64(compactions), "host-ms/compaction")
			})
		}
	}
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// A session the agent compacted itself is described by its live context
// too: what the agent sends when it resumes, not the history it no longer
// sends.
func TestSessionInfoLiveTokens(t *testing.T) {
	for _, path := range corpus(t) {
		_, info, err := loadSession(path)
		require.NoError(t, err)
		if info.AgentCompactions == 0 {
			assert.Equal(t, info.Tokens, info.LiveTokens, info.Name)
			continue
		}
		assert.Less(t, info.LiveTokens, info.Tokens/2, "%s: the live context is the history the agent still sends", info.Name)
		assert.Positive(t, info.LiveTokens, info.Name)
	}
}
