package cli

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An overhead learned from a file is the one of the setup that recorded
// it (its tools, its MCP servers, its version); inspect says so and names
// the flag that sets the overhead of the agent that resumes it.
func TestInspectSaysWhoseOverheadItLearned(t *testing.T) {
	path := filepath.Join(corpusDir(t), "claude-code-swift-app.jsonl")
	res := runCLI(t, runOpts{}, "inspect", path)
	require.Equal(t, 0, res.code, res.stderr)
	assert.Regexp(t, `agent overhead: [0-9,]+ tokens \(learned from the usage recorded at message [0-9]+: the recording setup's; --agent-overhead sets yours\)`, res.stdout)
	res = runCLI(t, runOpts{}, "inspect", "--agent-overhead", "21k", path)
	require.Equal(t, 0, res.code, res.stderr)
	assert.Contains(t, res.stdout, "agent overhead: 21,000 tokens (--agent-overhead)")
}
