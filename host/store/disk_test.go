package store_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/host/store/storetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func openDisk(t *testing.T, dir string, opts store.DiskOptions) *store.Disk {
	t.Helper()
	d, err := store.OpenDisk(dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

func TestDiskConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openDisk(t, t.TempDir(), store.DiskOptions{}) })
}

// TestDiskConformanceAcrossInstances runs the kit against two Disk values
// on one directory, each call going to the other one, as two processes
// of one machine share the store.
func TestDiskConformanceAcrossInstances(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		dir := t.TempDir()
		return &alternating{stores: [2]store.Store{openDisk(t, dir, store.DiskOptions{}), openDisk(t, dir, store.DiskOptions{})}}
	})
}

type alternating struct {
	mu     sync.Mutex
	next   int
	stores [2]store.Store
}

func (a *alternating) pick() store.Store {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.next++
	return a.stores[a.next%2]
}

func (a *alternating) Get(ctx context.Context, key string) (*store.Record, error) {
	return a.pick().Get(ctx, key)
}

func (a *alternating) Latest(ctx context.Context, conversation string) (*store.Record, error) {
	return a.pick().Latest(ctx, conversation)
}
func (a *alternating) Put(ctx context.Context, rec *store.Record) error {
	return a.pick().Put(ctx, rec)
}
func (a *alternating) Lock(ctx context.Context, conversation string, lease time.Duration) (store.Lock, error) {
	return a.pick().Lock(ctx, conversation, lease)
}
func (a *alternating) Close() error { return nil }

func TestDiskReopenKeepsRecords(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d, err := store.OpenDisk(dir, store.DiskOptions{})
	require.NoError(t, err)
	want := storetest.Sample("k1", "conv-a")
	require.NoError(t, d.Put(ctx, want))
	require.NoError(t, d.Close())
	_, err = d.Get(ctx, "k1")
	assert.ErrorIs(t, err, store.ErrUnavailable, "a closed store answered")
	_, err = d.Lock(ctx, "conv-a", time.Minute)
	assert.ErrorIs(t, err, store.ErrUnavailable, "a closed store took a lock")
	assert.NoError(t, d.Close(), "a second Close")

	d2 := openDisk(t, dir, store.DiskOptions{})
	got, err := d2.Get(ctx, "k1")
	require.NoError(t, err)
	storetest.AssertSame(t, want, got)
	got, err = d2.Latest(ctx, "conv-a")
	require.NoError(t, err)
	storetest.AssertSame(t, want, got)
}

func TestDiskInstancesShare(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, b := openDisk(t, dir, store.DiskOptions{}), openDisk(t, dir, store.DiskOptions{})
	want := storetest.Sample("k1", "conv-a")
	require.NoError(t, a.Put(ctx, want))
	got, err := b.Latest(ctx, "conv-a")
	require.NoError(t, err)
	storetest.AssertSame(t, want, got)

	held, err := a.Lock(ctx, "conv-a", time.Minute)
	require.NoError(t, err)
	_, err = b.Lock(ctx, "conv-a", time.Minute)
	assert.ErrorIs(t, err, store.ErrLocked)
	require.NoError(t, held.Release(ctx))
	held, err = b.Lock(ctx, "conv-a", time.Minute)
	require.NoError(t, err)
	assert.NoError(t, held.Release(ctx))
}

// TestDiskHelperProcess is not a test: TestDiskAcrossProcesses runs the
// test binary again with it, as a second process using the store.
func TestDiskHelperProcess(t *testing.T) {
	dir := os.Getenv("STORE_HELPER_DIR")
	if dir == "" {
		t.Skip("run by TestDiskAcrossProcesses")
	}
	ctx := context.Background()
	d, err := store.OpenDisk(dir, store.DiskOptions{})
	require.NoError(t, err)
	require.NoError(t, d.Put(ctx, storetest.Sample("from-child", "conv-child")))
	lease, err := time.ParseDuration(os.Getenv("STORE_HELPER_LEASE"))
	require.NoError(t, err)
	l, err := d.Lock(ctx, "conv-child", lease)
	require.NoError(t, err)
	fmt.Println("locked")
	// Hold until the parent closes stdin, or is killed by it.
	bufio.NewReader(os.Stdin).ReadString('\n')
	fmt.Println("release:", l.Release(ctx))
}

func TestDiskAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openDisk(t, dir, store.DiskOptions{})

	start := func(lease time.Duration) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDiskHelperProcess$")
		cmd.Env = append(os.Environ(), "STORE_HELPER_DIR="+dir, "STORE_HELPER_LEASE="+lease.String())
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
		out := bufio.NewReader(stdout)
		assert.Equal(t, "locked\n", readLine(t, out), "the helper process failed")
		return cmd, stdin, out
	}

	// The child's record is visible here and its lock excludes this
	// process until the child releases it.
	_, stdin, out := start(time.Minute)
	got, err := d.Latest(ctx, "conv-child")
	require.NoError(t, err)
	assert.Equal(t, "from-child", got.Key)
	_, err = d.Lock(ctx, "conv-child", time.Minute)
	assert.ErrorIs(t, err, store.ErrLocked)
	stdin.Close()
	assert.Equal(t, "release: <nil>\n", readLine(t, out))
	l, err := d.Lock(ctx, "conv-child", time.Minute)
	require.NoError(t, err, "the child's released lock is still held")
	require.NoError(t, l.Release(ctx))

	// A child killed while it holds the lock keeps it to its lease's end.
	cmd, _, _ := start(300 * time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for l = nil; l == nil; {
		l, err = d.Lock(ctx, "conv-child", time.Minute)
		if err != nil {
			require.ErrorIs(t, err, store.ErrLocked)
			require.True(t, time.Now().Before(deadline), "a killed process's lock outlived its lease")
			time.Sleep(20 * time.Millisecond)
		}
	}
	require.NoError(t, l.Release(ctx))
}

// readLine reads a line of the helper's output, waiting at most 30s.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line := make(chan string, 1)
	go func() { l, _ := r.ReadString('\n'); line <- l }()
	select {
	case l := <-line:
		return l
	case <-time.After(30 * time.Second):
		t.Fatal("the helper process wrote nothing within 30s")
		return ""
	}
}

func TestDiskEvictsOldestFirst(t *testing.T) {
	ctx := context.Background()
	const maxRecords = 10
	d := openDisk(t, t.TempDir(), store.DiskOptions{MaxRecords: maxRecords})
	for i := range 40 {
		require.NoError(t, d.Put(ctx, storetest.Sample(fmt.Sprintf("k%02d", i), fmt.Sprintf("conv-%02d", i))))
		assert.LessOrEqual(t, countFiles(t, filepath.Join(d.Dir(), "records")), maxRecords)
	}
	// What is left is the newest records, none missing among them.
	kept := 0
	for i := 39; i >= 0; i-- {
		_, err := d.Get(ctx, fmt.Sprintf("k%02d", i))
		if err != nil {
			require.ErrorIs(t, err, store.ErrNotFound)
			break
		}
		kept++
	}
	assert.Equal(t, countFiles(t, filepath.Join(d.Dir(), "records")), kept, "an older record outlived a newer one")
	assert.GreaterOrEqual(t, kept, maxRecords*9/10, "evicted below nine tenths of the cap")
	for i := range 40 {
		_, err := d.Latest(ctx, fmt.Sprintf("conv-%02d", i))
		if i >= 40-kept {
			assert.NoError(t, err, "conversation %d lost its record", i)
		} else {
			assert.ErrorIs(t, err, store.ErrNotFound, "conversation %d kept a pointer to an evicted record", i)
		}
	}
	assert.Equal(t, kept, countFiles(t, filepath.Join(d.Dir(), "latest")), "pointers of evicted records stayed")
}

// TestDiskEvictsAcrossInstances: two instances writing to one directory
// keep it under the cap together, each seeing the other's files.
func TestDiskEvictsAcrossInstances(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	stores := []*store.Disk{openDisk(t, dir, store.DiskOptions{MaxRecords: 4}), openDisk(t, dir, store.DiskOptions{MaxRecords: 4})}
	for i := range 20 {
		require.NoError(t, stores[i%2].Put(ctx, storetest.Sample(fmt.Sprintf("k%02d", i), "conv")))
		assert.LessOrEqual(t, countFiles(t, filepath.Join(dir, "records")), 4)
	}
	// Nine tenths of 4 is 3: at least the newest three stay.
	for i := 17; i < 20; i++ {
		_, err := stores[(i+1)%2].Get(ctx, fmt.Sprintf("k%02d", i))
		assert.NoError(t, err, "record %d, among the newest three, was evicted", i)
	}
}

func TestDiskEvictsByBytes(t *testing.T) {
	ctx := context.Background()
	const maxBytes = 64 << 10
	d := openDisk(t, t.TempDir(), store.DiskOptions{MaxBytes: maxBytes, MaxRecordBytes: 16 << 10})
	for i := range 40 {
		rec := storetest.Sample(fmt.Sprintf("k%02d", i), "conv")
		rec.Replacement = bytes.Repeat([]byte{byte(i)}, 4<<10)
		require.NoError(t, d.Put(ctx, rec))
		assert.LessOrEqual(t, dirBytes(t, filepath.Join(d.Dir(), "records")), int64(maxBytes))
	}
	latest, err := d.Latest(ctx, "conv")
	require.NoError(t, err)
	assert.Equal(t, "k39", latest.Key)
	assert.Greater(t, countFiles(t, filepath.Join(d.Dir(), "records")), 5, "evicted far below the cap")

	big := storetest.Sample("big", "conv")
	big.Replacement = make([]byte, 17<<10)
	err = d.Put(ctx, big)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "max_record_bytes")
}

func TestDiskCorruptRecordIsSkipped(t *testing.T) {
	ctx := context.Background()
	var logs syncBuffer
	d := openDisk(t, t.TempDir(), store.DiskOptions{MaxRecords: 3, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, d.Put(ctx, storetest.Sample("bad", "conv-bad")))
	require.NoError(t, d.Put(ctx, storetest.Sample("good", "conv-good")))
	path := findRecordFile(t, d.Dir(), "bad")
	require.NoError(t, os.WriteFile(path, []byte(`{"format":1,"record":{"key":"bad","replacement":"not base64!`), 0o600))

	_, err := d.Get(ctx, "bad")
	require.ErrorIs(t, err, store.ErrNotFound, "a corrupt record is a miss to the caller")
	assert.Contains(t, err.Error(), path, "the error names the file")
	_, err = d.Latest(ctx, "conv-bad")
	assert.ErrorIs(t, err, store.ErrNotFound)
	assert.Equal(t, 1, strings.Count(logs.String(), path), "the corrupt file is reported once: %s", logs.String())
	got, err := d.Latest(ctx, "conv-good")
	require.NoError(t, err, "a corrupt file stopped the store")
	assert.Equal(t, "good", got.Key)

	// A file cut short, as a full disk or a copy might leave it.
	goodPath := findRecordFile(t, d.Dir(), "good")
	b, err := os.ReadFile(goodPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(goodPath, b[:len(b)-1], 0o600))
	_, err = d.Get(ctx, "good")
	require.ErrorIs(t, err, store.ErrNotFound)
	assert.Contains(t, err.Error(), "replacement bytes")
	require.NoError(t, os.WriteFile(goodPath, b, 0o600))

	// The next compaction of the conversation replaces it.
	want := storetest.Sample("bad", "conv-bad")
	require.NoError(t, d.Put(ctx, want))
	got, err = d.Get(ctx, "bad")
	require.NoError(t, err)
	storetest.AssertSame(t, want, got)

	// A corrupt file is evicted like any other, and its pointer with it.
	require.NoError(t, os.WriteFile(path, []byte("garbage"), 0o600))
	for i := range 4 {
		require.NoError(t, d.Put(ctx, storetest.Sample(fmt.Sprintf("new%d", i), fmt.Sprintf("conv-new%d", i))))
	}
	assert.NoFileExists(t, path)
	assert.Equal(t, countFiles(t, filepath.Join(d.Dir(), "records")), countFiles(t, filepath.Join(d.Dir(), "latest")),
		"the corrupt record's pointer outlived it")
}

func TestDiskGuardWaitIsBounded(t *testing.T) {
	dir := t.TempDir()
	d := openDisk(t, dir, store.DiskOptions{GuardWait: 100 * time.Millisecond})
	// Another process holding the guard and hanging.
	f, err := os.OpenFile(filepath.Join(dir, "guard"), os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	start := time.Now()
	_, err = d.Lock(context.Background(), "conv-a", time.Minute)
	assert.ErrorIs(t, err, store.ErrUnavailable)
	assert.Contains(t, err.Error(), "guard_wait")
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.ErrorIs(t, d.Put(context.Background(), storetest.Sample("k", "c")), store.ErrUnavailable)

	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_UN))
	l, err := d.Lock(context.Background(), "conv-a", time.Minute)
	require.NoError(t, err, "the guard, once free, was not taken")
	assert.NoError(t, l.Release(context.Background()))
}

func countFiles(t *testing.T, dir string) int {
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			n++
		}
	}
	return n
}

func dirBytes(t *testing.T, dir string) int64 {
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var n int64
	for _, e := range entries {
		info, err := e.Info()
		require.NoError(t, err)
		n += info.Size()
	}
	return n
}

// findRecordFile finds the file holding key by its content, so the test
// does not repeat the store's naming scheme.
func findRecordFile(t *testing.T, dir, key string) string {
	entries, err := os.ReadDir(filepath.Join(dir, "records"))
	require.NoError(t, err)
	for _, e := range entries {
		path := filepath.Join(dir, "records", e.Name())
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		if bytes.Contains(b, []byte(`"key":"`+key+`"`)) {
			return path
		}
	}
	t.Fatalf("no record file holds %q", key)
	return ""
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func openDiskB(b *testing.B) *store.Disk {
	d, err := store.OpenDisk(b.TempDir(), store.DiskOptions{})
	require.NoError(b, err)
	b.Cleanup(func() { d.Close() })
	return d
}

func BenchmarkDiskLatestHit(b *testing.B) { storetest.BenchmarkLatestHit(b, openDiskB(b)) }
func BenchmarkDiskPut(b *testing.B)       { storetest.BenchmarkPut(b, openDiskB(b)) }

func BenchmarkDiskSessionAppend(b *testing.B) { storetest.BenchmarkSessionAppend(b, openDiskB(b)) }
func BenchmarkDiskSessionUpdate(b *testing.B) { storetest.BenchmarkSessionUpdate(b, openDiskB(b)) }
