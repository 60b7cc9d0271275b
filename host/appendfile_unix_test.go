//go:build unix

package host

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A file another program holds the lock of is refused once the wait
// runs out, and nothing is written.
func TestAppendRefusesALockedFile(t *testing.T) {
	path := writeTemp(t, "{\"a\":1}\n")
	_, st, err := ReadFileState(path, 0)
	require.NoError(t, err)
	holder, err := os.Open(path)
	require.NoError(t, err)
	defer holder.Close()
	require.NoError(t, syscall.Flock(int(holder.Fd()), syscall.LOCK_EX))

	began := time.Now()
	_, err = appendNoCarry(t, st, []byte("{\"ours\":1}\n"), 50*time.Millisecond)
	require.ErrorIs(t, err, ErrLogBusy)
	assert.Contains(t, err.Error(), path)
	assert.Less(t, time.Since(began), 20*time.Second)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "{\"a\":1}\n", string(data))

	require.NoError(t, syscall.Flock(int(holder.Fd()), syscall.LOCK_UN))
	_, err = appendNoCarry(t, st, []byte("{\"ours\":1}\n"), 0)
	assert.NoError(t, err, "once released the append goes in")
}
