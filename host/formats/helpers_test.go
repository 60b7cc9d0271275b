package formats

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
)

// findCorpus returns the path of a file of the shared corpus
// (../shared/corpus from the repository root, found by walking up to go.mod).
func findCorpus(name string) (string, bool) { return findShared("corpus", name) }

// findShared returns the path of a file in folder dir of ../shared.
func findShared(folder, name string) (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
	p := filepath.Join(dir, "..", "shared", folder, name)
	_, err = os.Stat(p)
	return p, err == nil
}

// corpusPath returns the path of a corpus file, skipping the test when the
// corpus is absent.
func corpusPath(tb testing.TB, name string) string {
	tb.Helper()
	p, ok := findCorpus(name)
	if !ok {
		tb.Skipf("corpus file %s not found in ../shared/corpus above the module root; skipping", name)
	}
	return p
}

// corpusNewPath returns the path of a file of ../shared/corpus-new,
// skipping the test when it is absent.
func corpusNewPath(tb testing.TB, name string) string {
	tb.Helper()
	p, ok := findShared("corpus-new", name)
	if !ok {
		tb.Skipf("corpus file %s not found in ../shared/corpus-new above the module root; skipping", name)
	}
	return p
}

type stats struct {
	calls, results, userTexts, assistants, usage, maxResult int
}

func countStats(msgs []abi.Message) stats {
	var st stats
	for _, m := range msgs {
		if m.Usage != nil {
			st.usage++
		}
		switch m.Role {
		case abi.RoleAssistant:
			st.assistants++
		case abi.RoleUser:
			if m.Content[0].Type != abi.BlockToolResult {
				st.userTexts++
			}
		}
		for _, b := range m.Content {
			switch b.Type {
			case abi.BlockToolUse:
				st.calls++
			case abi.BlockToolResult:
				st.results++
				if n := len([]rune(b.Text)); n > st.maxResult {
					st.maxResult = n
				}
			}
		}
	}
	return st
}

// checkPairs asserts, independently of Validate, that every tool call has
// exactly one result and every result one call.
func checkPairs(t *testing.T, msgs []abi.Message) {
	t.Helper()
	calls := map[string]int{}
	results := map[string]int{}
	for _, m := range msgs {
		for _, b := range m.Content {
			switch b.Type {
			case abi.BlockToolUse:
				calls[b.ID]++
			case abi.BlockToolResult:
				results[b.ToolUseID]++
			}
		}
	}
	for id, n := range calls {
		assert.Equal(t, 1, n, "calls with ID %s", id)
		assert.Equal(t, 1, results[id], "results of call %s", id)
	}
	for id := range results {
		assert.NotZero(t, calls[id], "tool result %s has no call", id)
	}
	assert.NoError(t, Validate(msgs))
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return data
}

func text(s string) abi.Block { return abi.Block{Type: abi.BlockText, Text: s} }

func toolUse(id, name, input string) abi.Block {
	return abi.Block{Type: abi.BlockToolUse, ID: id, Name: name, Input: []byte(input)}
}

func toolResult(id, s string) abi.Block {
	return abi.Block{Type: abi.BlockToolResult, ToolUseID: id, Text: s}
}

func msg(id, role string, blocks ...abi.Block) abi.Message {
	return abi.Message{ID: id, Role: role, Content: blocks}
}
