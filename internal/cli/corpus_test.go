package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/compact-host/compact-host/host"
)

// corpusDir finds ../shared/corpus beside the repository root.
func corpusDir(t *testing.T) string {
	t.Helper()
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "abi")); err == nil {
				break
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("repository root not found")
		}
		dir = parent
	}
	corpus := filepath.Join(dir, "..", "shared", "corpus")
	if _, err := os.Stat(corpus); err != nil {
		t.Skipf("no corpus at %s: the real-session tests need ../shared/corpus", corpus)
	}
	return corpus
}

// Every real session compacts offline at a 32k window with the
// structured strategy, and the result reloads as a valid session whose
// context fits.
func TestCompactEveryCorpusSession(t *testing.T) {
	corpus := corpusDir(t)
	files, _ := filepath.Glob(filepath.Join(corpus, "*"))
	if len(files) == 0 {
		t.Skip("corpus is empty")
	}
	cache := t.TempDir()
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.jsonl")
			var stdout, stderr bytes.Buffer
			code := Main([]string{"--strategy=structured", f, "--context-window", "32000", "-o", out, "--json"},
				IO{In: bytes.NewReader(nil), Out: &stdout, Err: &stderr, Getenv: func(k string) string {
					if k == "COMPACT_HOST_CACHE_DIR" {
						return cache
					}
					return ""
				}})
			if code != ExitOK {
				t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
			}
			var rep compactReport
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Action == "none" || rep.Strategy == "" && rep.Action != "emergency" || !rep.Fits || rep.TokensAfter >= rep.TokensBefore {
				t.Fatalf("report %+v", rep)
			}
			e, err := host.New(host.Config{ContextWindow: 32000, Tokenizer: "chars"})
			if err != nil {
				t.Fatal(err)
			}
			s, err := e.LoadSession(out)
			if err != nil {
				t.Fatal(err)
			}
			// The gate check after the compaction may compact again when
			// the kept tail is itself over the budget.
			if s.Len() != rep.Messages || len(s.Compactions()) == 0 {
				t.Fatalf("reloaded %d messages and %d compactions, want %d and at least 1", s.Len(), len(s.Compactions()), rep.Messages)
			}
			if err := host.Validate(s.Context(), false); err != nil {
				t.Fatalf("reloaded context is invalid: %v", err)
			}
			t.Logf("%s: %d messages, %d -> %d tokens, %s", rep.Format, rep.Messages, rep.TokensBefore, rep.TokensAfter, rep.Strategy)
		})
	}
}
