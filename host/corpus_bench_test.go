package host

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/internal/cputime"
)

// corpusFiles are the real agent sessions of ../shared/corpus and
// ../shared/corpus-new, at least one per format the importers read.
var corpusFiles = []string{
	"claude-code-go-cli.jsonl",
	"claude-code-swift-app.jsonl",
	"codex-typescript.jsonl",
	"copilot-cli.jsonl",
	"mini-swe-agent-django.traj.json",
	"swe-agent-pydicom.traj",
	// ../shared/corpus-new: the newer agents (its Roo Code ui_messages.json
	// is the UI's log, no session).
	"../corpus-new/aider-ts-monorepo.md",
	"../corpus-new/claude-code-subagents-pr-review.jsonl",
	"../corpus-new/gemini-cli-repo-tooling.json",
	"../corpus-new/opencode-nextjs-site.json",
	"../corpus-new/roo-code-task-restore.api_conversation_history.json",
}

// corpusPath is the path of a corpus file (../shared/corpus from the module
// root); the test or benchmark is skipped when the corpus is absent.
func corpusPath(tb testing.TB, name string) string {
	tb.Helper()
	dir, err := os.Getwd()
	require.NoError(tb, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Skipf("no go.mod above %s; skipping the corpus", dir)
		}
		dir = parent
	}
	p := filepath.Join(dir, "..", "shared", "corpus", name)
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("corpus file %s not found in ../shared/corpus above the module root; skipping", name)
	}
	return p
}

// corpusMessages reads a corpus session into canonical messages.
func corpusMessages(tb testing.TB, name string) []Message {
	tb.Helper()
	s, err := formats.ReadFile(corpusPath(tb, name))
	require.NoError(tb, err)
	require.NotEmpty(tb, s.Messages)
	return s.Messages
}

// BenchmarkAppendCorpus appends every message of each corpus session to a
// new session, file operations extracted as they arrive. Target: ≤ 1.3
// µs per message (ns/message).
func BenchmarkAppendCorpus(b *testing.B) {
	for _, name := range corpusFiles {
		b.Run(name, func(b *testing.B) {
			msgs := corpusMessages(b, name)
			e, err := New(Config{ContextWindow: 1 << 30, Tokenizer: "chars"})
			require.NoError(b, err)
			b.ReportAllocs()
			cpu := cputime.Process()
			for b.Loop() {
				s := e.NewSession()
				if err := s.Append(msgs...); err != nil {
					require.NoError(b, err)
				}
			}
			reportPerMessage(b, cpu, len(msgs))
		})
	}
}

// BenchmarkPlanCorpus is Engine.Plan on a 10,000-message session made of
// a corpus session's messages repeated (IDs renamed), keeping the newest
// 40,000 tokens. Target: ≤ 200 µs.
func BenchmarkPlanCorpus(b *testing.B) {
	for _, name := range corpusFiles {
		b.Run(name, func(b *testing.B) {
			e, s := repeatedSession(b, corpusMessages(b, name), 10000)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Plan(s, CompactOptions{KeepRecentTokens: 40000}); err != nil {
					require.NoError(b, err)
				}
			}
		})
	}
}

// repeatedSession appends msgs over and over, with fresh IDs, until the
// session holds n messages, ending where a copy of msgs ends so no call is
// left open.
func repeatedSession(tb testing.TB, msgs []Message, n int) (*Engine, *Session) {
	tb.Helper()
	e, err := New(Config{ContextWindow: 1 << 30, MaxOutputTokens: 32000, Tokenizer: "chars"}, WithStrategy("structured", &recorder{}))
	require.NoError(tb, err)
	s := e.NewSession()
	for round := 0; s.Len() < n; round++ {
		for _, m := range msgs {
			m.ID = fmt.Sprintf("r%d-%s", round, m.ID)
			m.Pinned = m.Pinned && round == 0
			require.NoError(tb, s.Append(m))
		}
	}
	return e, s
}

// reportPerMessage reports the wall time and the process CPU time (since
// cpu) per message of b.N runs over n messages. Above one busy thread the
// CPU figure counts the garbage collector's work too; on a loaded machine
// it is the steadier of the two.
func reportPerMessage(b *testing.B, cpu time.Duration, n int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/message")
	if cpu >= 0 {
		if now := cputime.Process(); now >= 0 {
			b.ReportMetric(float64((now-cpu).Nanoseconds())/float64(b.N*n), "cpu-ns/message")
		}
	}
}

// BenchmarkLoadSessionCorpus is LoadSession of the session log of each
// corpus session (its messages appended through OpenSession).
func BenchmarkLoadSessionCorpus(b *testing.B) {
	for _, name := range corpusFiles {
		b.Run(name, func(b *testing.B) {
			msgs := corpusMessages(b, name)
			e, err := New(Config{ContextWindow: 1 << 30, Tokenizer: "chars"})
			require.NoError(b, err)
			path := filepath.Join(b.TempDir(), "session.jsonl")
			s, err := e.OpenSession(path)
			require.NoError(b, err)
			require.NoError(b, s.Append(msgs...))
			require.NoError(b, s.Close())
			b.ReportAllocs()
			cpu := cputime.Process()
			for b.Loop() {
				if _, err := e.LoadSession(path); err != nil {
					require.NoError(b, err)
				}
			}
			reportPerMessage(b, cpu, len(msgs))
		})
	}
}
