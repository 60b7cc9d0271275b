package sessionio

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Claude Code records some answers it makes up itself ("No response
// requested.", an API error) as assistant lines of model <synthetic>
// with all-zero usage: no request stands behind them, so they teach
// nothing of the overhead. The first real usage does.
func TestOverheadSkipsSyntheticAnswers(t *testing.T) {
	line := func(n int, typ, msg string) string {
		parent := "null"
		if n > 0 {
			parent = fmt.Sprintf("%q", fmt.Sprintf("5e55a000-0000-4000-8000-%012d", n-1))
		}
		return fmt.Sprintf(`{"parentUuid":%s,"isSidechain":false,"userType":"external","cwd":"/w","sessionId":"5e55a000-0000-4000-8000-000000000000","version":"2.1.332","type":%q,"message":%s,"uuid":"5e55a000-0000-4000-8000-%012d","timestamp":"2030-05-01T10:00:%02d.000Z"}`, parent, typ, msg, n, n)
	}
	question := strings.Repeat("which test fails, and why? ", 40)
	file := strings.Join([]string{
		line(0, "user", fmt.Sprintf(`{"role":"user","content":%q}`, question)),
		line(1, "assistant", `{"id":"msg_s","model":"<synthetic>","role":"assistant","type":"message","stop_reason":"stop_sequence","content":[{"type":"text","text":"No response requested."}],"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`),
		line(2, "user", `{"role":"user","content":"the parser test"}`),
		line(3, "assistant", `{"id":"msg_1","model":"claude-sonnet-4-5","role":"assistant","type":"message","content":[{"type":"text","text":"It fails on an empty line."}],"usage":{"input_tokens":3,"output_tokens":12,"cache_creation_input_tokens":21000,"cache_read_input_tokens":0}}`),
	}, "\n") + "\n"
	e := engine(t)
	in, err := Read(e, "s.jsonl", []byte(file), "")
	require.NoError(t, err)
	assert.Equal(t, OverheadFile, in.Overhead.Source)
	assert.Equal(t, 3, in.Overhead.At, "learned from the real answer, not the synthetic one")
	msgs := in.Session.Context()
	assert.Equal(t, 21_003-countMessages(e, msgs[:3]), in.Overhead.Tokens)
}
