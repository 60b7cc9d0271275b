package storeopen_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/host/store/redisstore"
	"github.com/compact-host/compact-host/host/store/storeopen"
	"github.com/compact-host/compact-host/host/store/storetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func open(t *testing.T, rawURL string, opts storeopen.Options) store.Store {
	t.Helper()
	s, err := storeopen.Open(context.Background(), rawURL, opts)
	require.NoError(t, err, rawURL)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestDiskForms(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, rawURL := range []string{"", "disk"} {
		s := open(t, rawURL, storeopen.Options{DiskDir: filepath.Join(dir, "default")})
		require.IsType(t, &store.Disk{}, s)
		assert.Equal(t, filepath.Join(dir, "default"), s.(*store.Disk).Dir())
	}
	s := open(t, filepath.Join(dir, "plain"), storeopen.Options{})
	assert.DirExists(t, filepath.Join(dir, "plain", "records"))

	s = open(t, "file://"+filepath.Join(dir, "url")+"?max_records=2", storeopen.Options{})
	for _, k := range []string{"a", "b", "c"} {
		require.NoError(t, s.Put(ctx, storetest.Sample(k, "conv")))
	}
	_, err := s.Get(ctx, "a")
	assert.ErrorIs(t, err, store.ErrNotFound, "max_records=2 kept a third record")
	_, err = s.Get(ctx, "c")
	assert.NoError(t, err)
	entries, err := os.ReadDir(filepath.Join(dir, "url", "records"))
	require.NoError(t, err)
	assert.LessOrEqual(t, len(entries), 2)
}

func TestDefaultDirIsUserCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", cache)
	userCache, err := os.UserCacheDir()
	require.NoError(t, err)
	require.Contains(t, userCache, cache, "the user cache directory did not move to the test's")
	s := open(t, "", storeopen.Options{})
	assert.Equal(t, filepath.Join(userCache, "compact-host", "store"), s.(*store.Disk).Dir())
}

func TestMemory(t *testing.T) {
	assert.IsType(t, &store.Memory{}, open(t, "memory", storeopen.Options{}))
}

func TestRedis(t *testing.T) {
	srv := storetest.StartRedis(t)
	// Timeouts a loaded machine cannot miss.
	s := open(t, srv.URL()+"?prefix=opened:&call_timeout=30s&read_timeout=30s&write_timeout=30s", storeopen.Options{})
	require.IsType(t, &redisstore.Store{}, s)
	require.NoError(t, s.Put(context.Background(), storetest.Sample("k", "conv")))
	keys, err := srv.Command("EXISTS", "opened:conv:conv")
	require.NoError(t, err)
	assert.Equal(t, "1", keys)
}

func TestBadURLs(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"ftp://host/x", `unknown scheme "ftp"`},
		{"file://otherhost/x", "file:///absolute/dir"},
		{"file:///tmp/x?max_bytes=lots", "max_bytes"},
		{"file:///tmp/x?ttl=1h", `"ttl" is unknown`},
		{"mysql://user:hunter2@db/x", "accepted:"},
	} {
		_, err := storeopen.Open(context.Background(), tc.url, storeopen.Options{})
		require.Error(t, err, tc.url)
		assert.Contains(t, err.Error(), tc.want, tc.url)
		assert.Contains(t, err.Error(), storeopen.EnvVar, "the error names the setting")
		assert.NotContains(t, err.Error(), "hunter2")
	}
}
