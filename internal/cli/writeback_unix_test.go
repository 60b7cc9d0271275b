//go:build unix

package cli

import (
	"bytes"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A session file whose lock another program holds is refused with exit 7
// and a message naming the file and what to do; nothing is appended.
func TestCompactInPlaceRefusesALockedSession(t *testing.T) {
	path, orig := copyCorpus(t, "claude-code-swift-app.jsonl")
	holder, err := os.Open(path)
	require.NoError(t, err)
	defer holder.Close()
	require.NoError(t, syscall.Flock(int(holder.Fd()), syscall.LOCK_EX))

	r := runCLI(t, runOpts{}, "compact", "--strategy=structured", "--context-window", "64000", "--in-place", path)
	assert.Equal(t, ExitBusy, r.code, "%s%s", r.stdout, r.stderr)
	assert.Contains(t, r.stderr, path)
	assert.Contains(t, r.stderr, "close the agent")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(orig, data), "nothing was appended")
}
