package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/host"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	// corpus-new holds the newer agents' files; a Roo Code ui_messages.json
	// is the UI's log, refused with the file to read instead.
	newer, _ := filepath.Glob(filepath.Join(corpus, "..", "corpus-new", "*"))
	files = append(files, newer...)
	cache, home := sharedCache(t), t.TempDir()
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.jsonl")
			var stdout, stderr bytes.Buffer
			code := Main([]string{"--strategy=structured", f, "--context-window", "32000", "-o", out, "--output-format", "canonical", "--json"},
				IO{In: bytes.NewReader(nil), Out: &stdout, Err: &stderr, Getenv: func(k string) string {
					switch k {
					case "COMPACT_HOST_CACHE_DIR":
						return cache
					case "XDG_CONFIG_HOME":
						return home
					}
					return ""
				}})
			if strings.HasSuffix(f, ".ui_messages.json") {
				assert.Equal(t, ExitInput, code)
				assert.Contains(t, stderr.String(), "api_conversation_history.json")
				return
			}
			require.Equal(t, ExitOK, code, "%s%s", stdout.String(), stderr.String())
			var rep compactReport
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep))
			assert.NotEqual(t, "none", rep.Action)
			if rep.Action != "emergency" {
				assert.NotEmpty(t, rep.Strategy)
			}
			assert.True(t, rep.Fits, "fits: %+v", rep)
			assert.Less(t, rep.TokensAfter, rep.TokensBefore)
			e, err := host.New(host.Config{ContextWindow: 32000, Tokenizer: "chars"})
			require.NoError(t, err)
			s, err := e.LoadSession(out)
			require.NoError(t, err)
			// The gate check after the compaction may compact again when
			// the kept tail is itself over the budget.
			assert.Equal(t, rep.Messages, s.Len(), "reloaded messages")
			assert.NotEmpty(t, s.Compactions())
			assert.NoError(t, host.Validate(s.Context(), false), "the reloaded context is valid")
			t.Logf("%s: %d messages, %d -> %d tokens, %s", rep.Format, rep.Messages, rep.TokensBefore, rep.TokensAfter, rep.Strategy)
		})
	}
}
