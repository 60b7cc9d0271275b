package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/host/store/storetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Sessions on two Disk values over one directory: the conformance kit's
// session tests, calls alternating between them as between two
// processes.
func (a *alternating) sessions() store.Sessions { return a.pick().(store.Sessions) }

func (a *alternating) GetSession(ctx context.Context, id string) (*store.Session, error) {
	return a.sessions().GetSession(ctx, id)
}

func (a *alternating) PutSession(ctx context.Context, s *store.Session, ifRevision int64) (int64, error) {
	return a.sessions().PutSession(ctx, s, ifRevision)
}

func (a *alternating) AppendSession(ctx context.Context, id string, data []byte, ifRevision int64) (int64, error) {
	return a.sessions().AppendSession(ctx, id, data, ifRevision)
}

func (a *alternating) DeleteSession(ctx context.Context, id string) error {
	return a.sessions().DeleteSession(ctx, id)
}

func TestDiskSessionsSurviveReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d, err := store.OpenDisk(dir, store.DiskOptions{})
	require.NoError(t, err)
	_, err = d.PutSession(ctx, storetest.SampleSession("s1"), 0)
	require.NoError(t, err)
	_, err = d.AppendSession(ctx, "s1", []byte("more\n"), 1)
	require.NoError(t, err)
	require.NoError(t, d.Close())
	_, err = d.GetSession(ctx, "s1")
	assert.ErrorIs(t, err, store.ErrUnavailable, "a closed store answered")

	got, err := openDisk(t, dir, store.DiskOptions{}).GetSession(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, int64(2), got.Revision)
	assert.Equal(t, string(storetest.SampleSession("s1").Messages)+"more\n", string(got.Messages))
}

func TestDiskSessionsAreBounded(t *testing.T) {
	ctx := context.Background()
	d := openDisk(t, t.TempDir(), store.DiskOptions{MaxSessions: 3, MaxSessionBytes: 100})
	for i := range 5 {
		_, err := d.PutSession(ctx, &store.Session{ID: fmt.Sprintf("s%d", i), Messages: []byte("x")}, 0)
		require.NoError(t, err)
		// Appends to the newest keep it the most recently updated.
		_, err = d.AppendSession(ctx, fmt.Sprintf("s%d", i), []byte("y"), store.AnyRevision)
		require.NoError(t, err)
	}
	entries, err := os.ReadDir(filepath.Join(d.Dir(), "sessions"))
	require.NoError(t, err)
	assert.Len(t, entries, 3, "sessions kept under max_sessions 3")
	for i, want := range []bool{false, false, true, true, true} {
		_, err := d.GetSession(ctx, fmt.Sprintf("s%d", i))
		assert.Equal(t, want, err == nil, "session s%d kept: %v", i, err)
	}
	_, err = d.AppendSession(ctx, "s4", make([]byte, 99), store.AnyRevision)
	assert.ErrorIs(t, err, store.ErrSessionTooLarge)
}

func TestDiskSessionCorruptFileIsReplaced(t *testing.T) {
	ctx := context.Background()
	d := openDisk(t, t.TempDir(), store.DiskOptions{})
	_, err := d.PutSession(ctx, storetest.SampleSession("s1"), 0)
	require.NoError(t, err)
	entries, err := os.ReadDir(filepath.Join(d.Dir(), "sessions"))
	require.NoError(t, err)
	require.Len(t, entries, 1)
	path := filepath.Join(d.Dir(), "sessions", entries[0].Name())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b[:len(b)-3], 0o600), "cut the file as a crash without rename could not")
	_, err = d.GetSession(ctx, "s1")
	assert.ErrorIs(t, err, store.ErrNotFound, "a cut session file reads as missing")
	rev, err := d.PutSession(ctx, storetest.SampleSession("s1"), 0)
	require.NoError(t, err, "a create replaces the corrupt file")
	assert.Equal(t, int64(1), rev)
}
