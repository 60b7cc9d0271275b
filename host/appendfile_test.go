package host

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "session.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

func TestAppendIfUnchangedAndUndo(t *testing.T) {
	const before = "{\"a\":1}\n{\"b\":2}\n"
	path := writeTemp(t, before)
	data, st, err := ReadFileState(path, 0)
	require.NoError(t, err)
	assert.Equal(t, before, string(data))
	assert.Equal(t, sha256.Sum256(data), st.SHA256)

	block := []byte("{\"c\":3}\n{\"d\":4}\n")
	ap, err := AppendIfUnchanged(st, block, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(len(before)), ap.Offset)
	assert.Equal(t, AppendedTo(st.SHA256, st.Size, block), ap)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before+string(block), string(got))

	// The same read cannot append twice: the file is no longer what
	// was read.
	_, err = AppendIfUnchanged(st, block, 0)
	assert.ErrorIs(t, err, ErrLogChanged)

	require.NoError(t, TruncateIfUnchanged(path, ap, 0))
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, string(got), "undo restores the file byte for byte")
	// Twice is refused: the block is gone.
	assert.ErrorIs(t, TruncateIfUnchanged(path, ap, 0), ErrLogChanged)
}

func TestAppendIfUnchangedRefusesAChangedFile(t *testing.T) {
	const before = "{\"a\":1}\n"
	for name, change := range map[string]func(path string){
		"grown": func(path string) {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString("{\"agent\":true}\n")
			require.NoError(t, err)
			require.NoError(t, f.Close())
		},
		"touched": func(path string) {
			later := time.Now().Add(time.Hour)
			require.NoError(t, os.Chtimes(path, later, later))
		},
		"rewritten in place, same size and time": func(path string) {
			fi, err := os.Stat(path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, []byte("{\"z\":9}\n"), 0o644))
			require.NoError(t, os.Chtimes(path, fi.ModTime(), fi.ModTime()))
		},
		"replaced": func(path string) {
			tmp := path + ".new"
			require.NoError(t, os.WriteFile(tmp, []byte(before), 0o644))
			require.NoError(t, os.Rename(tmp, path))
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := writeTemp(t, before)
			_, st, err := ReadFileState(path, 0)
			require.NoError(t, err)
			change(path)
			now, err := os.ReadFile(path)
			require.NoError(t, err)
			_, err = AppendIfUnchanged(st, []byte("{\"ours\":1}\n"), 0)
			require.ErrorIs(t, err, ErrLogChanged)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), "close the agent")
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, string(now), string(after), "nothing was written")
		})
	}
}

func TestTruncateIfUnchangedRefuses(t *testing.T) {
	const before = "{\"a\":1}\n"
	block := []byte("{\"ours\":1}\n")
	for name, tc := range map[string]struct {
		change func(path string)
		says   string
	}{
		"the agent went on": {func(path string) {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString("{\"agent\":2}\n")
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}, "written after the compaction"},
		"the prefix was edited": {func(path string) {
			require.NoError(t, os.WriteFile(path, []byte("{\"A\":1}\n"+string(block)), 0o644))
		}, "differ"},
		"shortened": {func(path string) {
			require.NoError(t, os.WriteFile(path, []byte(before), 0o644))
		}, "shorter"},
	} {
		t.Run(name, func(t *testing.T) {
			path := writeTemp(t, before)
			_, st, err := ReadFileState(path, 0)
			require.NoError(t, err)
			ap, err := AppendIfUnchanged(st, block, 0)
			require.NoError(t, err)
			tc.change(path)
			now, err := os.ReadFile(path)
			require.NoError(t, err)
			err = TruncateIfUnchanged(path, ap, 0)
			require.ErrorIs(t, err, ErrLogChanged)
			assert.Contains(t, err.Error(), tc.says)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, string(now), string(after), "nothing was changed")
		})
	}
}

func TestReadFileStateLimits(t *testing.T) {
	path := writeTemp(t, "{\"a\":1}\n")
	_, _, err := ReadFileState(path, 3)
	assert.ErrorIs(t, err, ErrSessionTooLarge)
	_, _, err = ReadFileState(t.TempDir(), 0)
	assert.Error(t, err)
}
