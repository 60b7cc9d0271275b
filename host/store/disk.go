package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/compact-host/compact-host/internal/atomicfile"
)

// Defaults of DiskOptions.
const (
	DefaultMaxBytes       = 256 << 20
	DefaultMaxRecords     = 10_000
	DefaultMaxRecordBytes = 4 << 20
	// DefaultGuardWait bounds how long a call waits for another process
	// that holds the directory's guard lock (held for microseconds, or
	// for the milliseconds of an eviction scan).
	DefaultGuardWait = 5 * time.Second
	// DefaultMaxSessions caps the sessions a Disk store keeps.
	DefaultMaxSessions = 10_000
)

// DiskOptions configures a Disk store. The zero value means the defaults.
type DiskOptions struct {
	// MaxBytes and MaxRecords cap the record files; past either, the
	// records written longest ago are removed first.
	MaxBytes   int64
	MaxRecords int
	// MaxRecordBytes is the largest record file Put writes or Get reads.
	MaxRecordBytes int
	// GuardWait bounds the wait for another process's guard lock.
	GuardWait time.Duration
	// MaxSessionBytes bounds one session (DefaultMaxSessionBytes);
	// MaxSessions caps their number (DefaultMaxSessions): creating one
	// more removes the session updated longest ago.
	MaxSessionBytes int
	MaxSessions     int
	// Logger receives reports of corrupt files; nil means slog.Default().
	Logger *slog.Logger
}

func (o DiskOptions) withDefaults() (DiskOptions, error) {
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxRecords == 0 {
		o.MaxRecords = DefaultMaxRecords
	}
	if o.MaxRecordBytes == 0 {
		o.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if o.GuardWait == 0 {
		o.GuardWait = DefaultGuardWait
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxSessionBytes == 0 {
		o.MaxSessionBytes = DefaultMaxSessionBytes
	}
	if o.MaxSessions == 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	switch {
	case o.MaxBytes < 0 || o.MaxRecords < 0 || o.MaxRecordBytes < 0 || o.GuardWait < 0 || o.MaxSessionBytes < 0 || o.MaxSessions < 0:
		return o, errors.New("store: disk store limits must not be negative")
	case o.MaxBytes < int64(o.MaxRecordBytes):
		return o, fmt.Errorf("store: max_bytes %d is below max_record_bytes %d: one record could never be kept", o.MaxBytes, o.MaxRecordBytes)
	}
	return o, nil
}

// DefaultDir is where the embedded store lives unless told otherwise:
// <user cache dir>/compact-host/store. It is a cache: deleting it costs
// recomputed summaries, nothing else.
func DefaultDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("store: no user cache directory (%w): set the store directory explicitly", err)
	}
	return filepath.Join(dir, "compact-host", "store"), nil
}

// Disk is the embedded store: one file per record under a directory, no
// server. Every write goes to a temporary file that is synced and renamed
// into place, so a reader never sees half a record; a flock on the
// directory's guard file serializes what must be (locks, the eviction
// scan) across the processes of one machine. Several Disk values on one
// directory, in one process or many, share records and locks.
//
// Layout: records/<sha256(key)>.json holds a record; latest/<sha256(conversation)>
// holds the key of the conversation's newest record; locks/<sha256(conversation)>
// holds a lock's token and the end of its lease; sessions/<sha256(id)>
// holds a session (see Sessions).
type Disk struct {
	dir  string
	opts DiskOptions

	mu     sync.Mutex // serializes this process's use of guard
	guard  *os.File
	closed atomic.Bool

	reported sync.Map // path → modification time already reported as corrupt

	// Eviction's view of the records directory, under mu.
	files map[string]*recordFile
	scan  uint64

	// stampMu guards lastStamp, the modification time last given to a
	// session file (see stampSession).
	stampMu   sync.Mutex
	lastStamp time.Time
}

const recordFormat = 1

// recordHeader is a record file's first line. The Replacement follows the
// newline as raw bytes, neither escaped nor base64-encoded, so a read
// parses a few hundred bytes of JSON and copies the rest; its length in
// the header tells a whole file from a cut or altered one. The format
// number lets a later version tell an old file from a corrupt one.
type recordHeader struct {
	Format           int     `json:"format"`
	ReplacementBytes int     `json:"replacement_bytes"`
	Record           *Record `json:"record"`
}

func encodeRecord(rec *Record) ([]byte, error) {
	bare := *rec
	bare.Replacement = nil
	head, err := json.Marshal(recordHeader{Format: recordFormat, ReplacementBytes: len(rec.Replacement), Record: &bare})
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(head)+1+len(rec.Replacement))
	b = append(append(head, '\n'), rec.Replacement...)
	return b, nil
}

func decodeRecord(b []byte, key string) (*Record, error) {
	head, rest, ok := bytes.Cut(b, []byte{'\n'})
	if !ok {
		return nil, errors.New("no header line")
	}
	var h recordHeader
	if err := json.Unmarshal(head, &h); err != nil {
		return nil, err
	}
	switch {
	case h.Format != recordFormat:
		return nil, fmt.Errorf("format %d, this version reads %d", h.Format, recordFormat)
	case h.Record == nil || h.Record.Key != key:
		return nil, errors.New("the file holds another key's record")
	case h.ReplacementBytes != len(rest):
		return nil, fmt.Errorf("%d replacement bytes, the header says %d", len(rest), h.ReplacementBytes)
	}
	// rest is this call's own buffer, so the record may keep it.
	h.Record.Replacement = rest
	return h.Record, nil
}

// OpenDisk opens (creating it if need be) the store in dir.
func OpenDisk(dir string, opts DiskOptions) (*Disk, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := flockSupported(); err != nil {
		return nil, err
	}
	for _, sub := range []string{"records", "latest", "locks", "sessions"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("store: create %s: %w (set the store directory to a writable place)", dir, err)
		}
	}
	guard, err := os.OpenFile(filepath.Join(dir, "guard"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", dir, err)
	}
	return &Disk{dir: dir, opts: opts, guard: guard}, nil
}

// Dir is the directory the store keeps its files in.
func (d *Disk) Dir() string { return d.dir }

// MaxSessions is how many sessions the store keeps before it removes the
// one updated longest ago, whoever made it: a service that keeps quotas
// per tenant stays below it to keep tenants apart.
func (d *Disk) MaxSessions() int { return d.opts.MaxSessions }

func hashName(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (d *Disk) recordPath(key string) string {
	return filepath.Join(d.dir, "records", hashName(key)+".json")
}

func (d *Disk) latestPath(conversation string) string {
	return filepath.Join(d.dir, "latest", hashName(conversation))
}

func (d *Disk) lockPath(conversation string) string {
	return filepath.Join(d.dir, "locks", hashName(conversation))
}

func (d *Disk) Get(ctx context.Context, key string) (*Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := CheckID("key", key); err != nil {
		return nil, err
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	return d.read(key)
}

func (d *Disk) read(key string) (*Record, error) {
	path := d.recordPath(key)
	b, err := readLimited(path, d.recordFileLimit())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("key %q: %w", key, ErrNotFound)
	}
	if errors.Is(err, errTooLarge) {
		return nil, d.corrupt(path, err)
	}
	if err != nil {
		return nil, d.unavailable(err)
	}
	rec, err := decodeRecord(b, key)
	if err != nil {
		return nil, d.corrupt(path, err)
	}
	return rec, nil
}

// recordFileLimit allows for the header and the escapes of the Summary.
func (d *Disk) recordFileLimit() int64 {
	return int64(d.opts.MaxRecordBytes)*2 + 64<<10
}

func (d *Disk) Latest(ctx context.Context, conversation string) (*Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := CheckID("conversation", conversation); err != nil {
		return nil, err
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	path := d.latestPath(conversation)
	b, err := readLimited(path, MaxIDBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("conversation %q: %w", conversation, ErrNotFound)
	}
	if err != nil && !errors.Is(err, errTooLarge) {
		return nil, d.unavailable(err)
	}
	if len(b) == 0 || errors.Is(err, errTooLarge) {
		return nil, d.corrupt(path, errors.New("not a record key"))
	}
	rec, err := d.read(string(b))
	if errors.Is(err, ErrNotFound) && !errors.Is(err, errCorrupt) {
		// The record was evicted after the pointer was read.
		return nil, fmt.Errorf("conversation %q: %w", conversation, ErrNotFound)
	}
	return rec, err
}

func (d *Disk) Put(ctx context.Context, rec *Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := rec.Check(); err != nil {
		return err
	}
	b, err := encodeRecord(rec)
	if err != nil {
		return fmt.Errorf("store: encode record %q: %w", rec.Key, err)
	}
	if len(rec.Replacement)+len(rec.Summary) > d.opts.MaxRecordBytes || int64(len(b)) > d.recordFileLimit() {
		return fmt.Errorf("store: record %q is %d bytes, over the store's limit of %d (max_record_bytes)", rec.Key, len(b), d.opts.MaxRecordBytes)
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	// The record's write and sync need no guard: concurrent Puts sync
	// in parallel, and an eviction scan never picks the newest file.
	path := d.recordPath(rec.Key)
	if err := atomicfile.Write(path, 0o600, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return d.unavailable(err)
	}
	// The eviction order is the write time; set it to the clock's full
	// resolution, as a file system may keep a coarser one.
	now := time.Now()
	if err := os.Chtimes(path, now, now); err != nil {
		if info, err := os.Stat(path); err == nil {
			now = info.ModTime()
		}
	}
	// The pointer moves under the guard, so that an eviction scan does
	// not remove a pointer this Put has just moved.
	release, err := d.lockGuard(ctx)
	if err != nil {
		return err
	}
	defer release()
	if rec.Conversation != "" {
		if err := atomicfile.Write(d.latestPath(rec.Conversation), 0o600, func(w io.Writer) error {
			_, err := io.WriteString(w, rec.Key)
			return err
		}); err != nil {
			return d.unavailable(err)
		}
	}
	d.evict(rec.Key, int64(len(b)), now)
	return nil
}

type recordFile struct {
	size int64
	mod  time.Time
	seen uint64 // the scan that last listed it
}

// evict removes the oldest record files once a cap is passed, until both
// are met with a tenth to spare, never the one just written, and clears what crashed writers and holders left:
// temporary files, expired lock files, pointers to removed records. It
// runs under the guard, once per Put. A Put follows a model call, so a
// listing per Put costs little beside it; the size and time of each file
// are kept from the scan that first saw it (d.files), so a scan reads
// the names and stats only new files. A record another process rewrote
// under the same name keeps its first time here, and is evicted a little
// early. Failures cost space, never a record: they are logged and Put
// goes on.
func (d *Disk) evict(keep string, keepSize int64, keepMod time.Time) {
	recordsDir := filepath.Join(d.dir, "records")
	dir, err := os.Open(recordsDir)
	if err != nil {
		d.opts.Logger.Warn("store: list records for eviction", "dir", recordsDir, "err", err)
		return
	}
	names, err := dir.Readdirnames(-1)
	dir.Close()
	if err != nil {
		d.opts.Logger.Warn("store: list records for eviction", "dir", recordsDir, "err", err)
		return
	}
	if d.files == nil {
		d.files = map[string]*recordFile{}
	}
	d.scan++
	keepName := hashName(keep) + ".json"
	var total int64
	for _, name := range names {
		if strings.HasPrefix(name, ".") {
			path := filepath.Join(recordsDir, name)
			if info, err := os.Lstat(path); err == nil && time.Since(info.ModTime()) > 10*time.Minute {
				os.Remove(path)
			}
			continue
		}
		f := d.files[name]
		switch {
		case name == keepName:
			f = &recordFile{size: keepSize, mod: keepMod}
			d.files[name] = f
		case f == nil:
			info, err := os.Lstat(filepath.Join(recordsDir, name))
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			f = &recordFile{size: info.Size(), mod: info.ModTime()}
			d.files[name] = f
		}
		f.seen = d.scan
		total += f.size
	}
	count := 0
	for name, f := range d.files {
		if f.seen != d.scan {
			delete(d.files, name) // removed by another process
			continue
		}
		count++
	}
	if count <= d.opts.MaxRecords && total <= d.opts.MaxBytes {
		d.sweepLocks()
		return
	}
	type candidate struct {
		name string
		*recordFile
	}
	var oldest []candidate
	for name, f := range d.files {
		if name != keepName {
			oldest = append(oldest, candidate{name, f})
		}
	}
	slices.SortFunc(oldest, func(a, b candidate) int {
		if c := a.mod.Compare(b.mod); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	// Down to nine tenths of each cap, so that a full store sorts its
	// records once per tenth of the cap's Puts, not on every Put.
	lowRecords, lowBytes := d.opts.MaxRecords-max(d.opts.MaxRecords/10, 1), d.opts.MaxBytes-d.opts.MaxBytes/10
	for _, f := range oldest {
		if count <= lowRecords && total <= lowBytes {
			break
		}
		path := filepath.Join(recordsDir, f.name)
		d.dropPointer(path)
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.opts.Logger.Warn("store: evict record", "file", path, "err", err)
			continue
		}
		delete(d.files, f.name)
		count--
		total -= f.size
	}
	d.sweepPointers(count)
	d.sweepLocks()
}

// dropPointer removes the latest pointer that names the record in path.
func (d *Disk) dropPointer(path string) {
	b, err := readLimited(path, d.recordFileLimit())
	if err != nil {
		return
	}
	var h recordHeader
	head, _, _ := bytes.Cut(b, []byte{'\n'})
	if json.Unmarshal(head, &h) != nil || h.Record == nil || h.Record.Conversation == "" {
		return // a corrupt record's pointer goes in sweepPointers
	}
	pointer := d.latestPath(h.Record.Conversation)
	if key, err := readLimited(pointer, MaxIDBytes); err == nil && string(key) == h.Record.Key {
		os.Remove(pointer)
	}
}

// sweepPointers removes pointers to missing records when there are more
// pointers than records, which only corrupt evicted records leave.
func (d *Disk) sweepPointers(records int) {
	latestDir := filepath.Join(d.dir, "latest")
	dir, err := os.Open(latestDir)
	if err != nil {
		return
	}
	names, err := dir.Readdirnames(-1)
	dir.Close()
	if err != nil || len(names) <= records {
		return
	}
	for _, name := range names {
		if strings.HasPrefix(name, ".") {
			continue
		}
		pointer := filepath.Join(latestDir, name)
		key, err := readLimited(pointer, MaxIDBytes)
		if err != nil {
			continue
		}
		if _, err := os.Stat(d.recordPath(string(key))); errors.Is(err, fs.ErrNotExist) {
			os.Remove(pointer)
		}
	}
}

// sweepLocks removes lock files whose lease ended: a holder that crashed
// leaves one.
func (d *Disk) sweepLocks() {
	locksDir := filepath.Join(d.dir, "locks")
	entries, err := os.ReadDir(locksDir)
	if err != nil {
		return
	}
	now := time.Now()
	for _, e := range entries {
		path := filepath.Join(locksDir, e.Name())
		if strings.HasPrefix(e.Name(), ".") {
			if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) > 10*time.Minute {
				os.Remove(path)
			}
			continue
		}
		if _, expires, err := readLockFile(path); err == nil && now.After(expires) {
			os.Remove(path)
		}
	}
}

func (d *Disk) Lock(ctx context.Context, conversation string, lease time.Duration) (Lock, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := CheckLock(conversation, lease); err != nil {
		return nil, err
	}
	release, err := d.lockGuard(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	path := d.lockPath(conversation)
	now := time.Now()
	_, expires, err := readLockFile(path)
	switch {
	case err == nil && now.Before(expires):
		return nil, fmt.Errorf("conversation %q: %w", conversation, ErrLocked)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		// An unreadable lock protects nothing: take it over.
		d.opts.Logger.Warn("store: lock file is corrupt; replacing it", "file", path, "err", err)
	}
	token := rand.Text()
	if err := atomicfile.Write(path, 0o600, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%s %d\n", token, now.Add(lease).UnixNano())
		return err
	}); err != nil {
		return nil, d.unavailable(err)
	}
	return &diskLock{d: d, conversation: conversation, token: token}, nil
}

type diskLock struct {
	d            *Disk
	conversation string
	token        string
}

func (l *diskLock) Release(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	release, err := l.d.lockGuard(ctx)
	if err != nil {
		return err
	}
	defer release()
	path := l.d.lockPath(l.conversation)
	token, expires, err := readLockFile(path)
	if err != nil || token != l.token {
		return fmt.Errorf("conversation %q: %w", l.conversation, ErrLeaseLost)
	}
	if err := os.Remove(path); err != nil {
		return l.d.unavailable(err)
	}
	if time.Now().After(expires) {
		return fmt.Errorf("conversation %q: %w", l.conversation, ErrLeaseLost)
	}
	return nil
}

func readLockFile(path string) (token string, expires time.Time, err error) {
	b, err := readLimited(path, 256)
	if err != nil {
		return "", time.Time{}, err
	}
	token, nanos, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
	n, perr := strconv.ParseInt(nanos, 10, 64)
	if !ok || token == "" || perr != nil {
		return "", time.Time{}, fmt.Errorf("lock file %s: not a token and a lease end", path)
	}
	return token, time.Unix(0, n), nil
}

// lockGuard takes the directory's guard: this process's mutex, then the
// flock that excludes other processes, polled so that the wait honours
// ctx and GuardWait instead of blocking in the kernel.
func (d *Disk) lockGuard(ctx context.Context) (release func(), err error) {
	d.mu.Lock()
	if err := d.checkOpen(); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	deadline := time.Now().Add(d.opts.GuardWait)
	wait := 100 * time.Microsecond
	for {
		ok, err := flockTry(d.guard)
		if err != nil {
			d.mu.Unlock()
			return nil, d.unavailable(fmt.Errorf("flock %s: %w", d.guard.Name(), err))
		}
		if ok {
			return func() {
				flockRelease(d.guard)
				d.mu.Unlock()
			}, nil
		}
		if time.Now().After(deadline) {
			d.mu.Unlock()
			return nil, fmt.Errorf("store: another process has held %s for over %v (guard_wait): %w", d.guard.Name(), d.opts.GuardWait, ErrUnavailable)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			d.mu.Unlock()
			return nil, fmt.Errorf("store: waiting for %s: %w (%w)", d.guard.Name(), ctx.Err(), ErrUnavailable)
		case <-t.C:
		}
		wait = min(wait*2, 10*time.Millisecond)
	}
}

func (d *Disk) checkOpen() error {
	if d.closed.Load() {
		return fmt.Errorf("store: %s is closed: %w", d.dir, ErrUnavailable)
	}
	return nil
}

// Close releases the guard file; later calls fail with ErrUnavailable.
// Records stay on disk. A second Close is a no-op.
func (d *Disk) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	// Wait for a call that holds the guard.
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.guard.Close()
}

// errCorrupt marks a file the store could not read as a record: it is
// reported once and treated as missing, so the caller recomputes and its
// Put replaces the file.
var errCorrupt = errors.New("corrupt")

var errTooLarge = errors.New("larger than the limit")

func (d *Disk) corrupt(path string, cause error) error {
	info, statErr := os.Stat(path)
	if statErr == nil {
		if prev, ok := d.reported.Load(path); !ok || !prev.(time.Time).Equal(info.ModTime()) {
			d.reported.Store(path, info.ModTime())
			d.opts.Logger.Warn("store: skipping a corrupt file; the next compaction of its conversation replaces it, or delete it",
				"file", path, "err", cause)
		}
	}
	return fmt.Errorf("store: %s is %w (%v): delete it or let the next Put replace it: %w", path, errCorrupt, cause, ErrNotFound)
}

func (d *Disk) unavailable(err error) error {
	return fmt.Errorf("store: %s: %w (%w)", d.dir, err, ErrUnavailable)
}

// readLimited reads path, failing on a file larger than limit rather than
// loading it.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() > limit {
		return nil, fmt.Errorf("%s: %w of %d bytes", path, errTooLarge, limit)
	}
	// The size read is the open file's: a rename over path since the
	// open does not change it.
	b := make([]byte, info.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

var _ Store = (*Disk)(nil)
