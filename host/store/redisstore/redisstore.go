// Package redisstore is a store.Store in Redis, shared by every replica of
// the proxy or the service, so that a conversation is compacted once
// whichever replica its requests reach. It lives apart from package store
// so that only a program that chooses Redis links a Redis client.
//
// Keys, under Options.Prefix:
//
//	rec:<key>            a record, as JSON
//	conv:<conversation>  the conversation's newest record, inline, so
//	                     that Latest is one GET
//	lock:<conversation>  a lock's random token, SET NX with the lease as
//	                     its expiry
//	sess:<id>            a session's hash: rev, settings, latest,
//	                     compactions, updated_at (Unix nanoseconds)
//	sessmsg:<id>         a session's messages, a string that APPEND grows
//
// Records, conversation keys and sessions expire after Options.TTL (a
// session's TTL restarts with every write). Put writes both
// in one MULTI/EXEC. A single Redis (with or without replicas and
// Sentinel) is supported; Redis Cluster is not, as a Put's two keys may
// hash to different slots.
package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/compact-host/compact-host/host/store"
	"github.com/redis/go-redis/v9"
)

// Defaults of Options.
const (
	DefaultTTL         = 7 * 24 * time.Hour
	DefaultPrefix      = "compact-host:"
	DefaultDialTimeout = time.Second
	// DefaultIOTimeout bounds each read and write on a connection.
	DefaultIOTimeout = 500 * time.Millisecond
	// DefaultCallTimeout bounds a whole call, retries included, when the
	// caller's context has no earlier deadline.
	DefaultCallTimeout = 2 * time.Second
)

// Options configures a Store. A zero field takes the URL's query
// parameter of the same name (ttl, prefix, call_timeout, max_record_bytes,
// max_session_bytes),
// then the default. The URL's other parameters are go-redis's own
// (dial_timeout, read_timeout, write_timeout, pool_size, max_retries...).
type Options struct {
	TTL            time.Duration
	Prefix         string
	CallTimeout    time.Duration
	MaxRecordBytes int
	// MaxSessionBytes bounds a session (store.DefaultMaxSessionBytes);
	// URL parameter max_session_bytes.
	MaxSessionBytes int
	// Hook, if set, sees every command and pipeline the client sends: a
	// place for metrics and for tests that count round trips.
	Hook redis.Hook
}

// Store is a store.Store in Redis.
type Store struct {
	client *redis.Client
	addr   string
	opts   Options
}

// releaseScript deletes the lock only if it still holds the caller's
// token: a holder whose lease ran out must not free its successor's lock.
var releaseScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
end
return 0`)

// Open connects to the Redis at rawURL (redis://[user:password@]host:port/db,
// rediss:// for TLS, unix:///path.sock) and checks that it answers. An
// error wrapping store.ErrUnavailable means it did not: a caller may go on
// without a store.
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	redisURL, err := takeOwnParams(rawURL, &opts)
	if err != nil {
		return nil, err
	}
	ropts, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, fmt.Errorf("redisstore: store URL %s: %w", redact(rawURL), err)
	}
	if ropts.DialTimeout == 0 {
		ropts.DialTimeout = DefaultDialTimeout
	}
	if ropts.ReadTimeout == 0 {
		ropts.ReadTimeout = DefaultIOTimeout
	}
	if ropts.WriteTimeout == 0 {
		ropts.WriteTimeout = DefaultIOTimeout
	}
	if ropts.MaxRetries == 0 {
		// One retry covers a pooled connection that a server restart
		// closed; more would only delay the fallback when it is down.
		ropts.MaxRetries = 1
	}
	// A refused dial is final at once: go-redis's default of five dial
	// attempts 100ms apart would make every call wait half a second.
	ropts.DialerRetries = 1
	ropts.ContextTimeoutEnabled = true
	ropts.DisableIdentity = true
	s := &Store{client: redis.NewClient(ropts), addr: ropts.Addr, opts: opts}
	if opts.Hook != nil {
		s.client.AddHook(opts.Hook)
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	if err := s.client.Ping(ctx).Err(); err != nil {
		s.client.Close()
		return nil, s.fail("ping", err)
	}
	return s, nil
}

// takeOwnParams moves this package's query parameters from rawURL into
// opts (where opts leaves them zero) and returns the URL go-redis parses.
func takeOwnParams(rawURL string, opts *Options) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("redisstore: store URL %s: %w", redact(rawURL), err)
	}
	q := u.Query()
	bad := func(name string, err error) error {
		return fmt.Errorf("redisstore: store URL parameter %s=%q: %w", name, q.Get(name), err)
	}
	for _, d := range []struct {
		name string
		into *time.Duration
	}{{"ttl", &opts.TTL}, {"call_timeout", &opts.CallTimeout}} {
		if v := q.Get(d.name); v != "" && *d.into == 0 {
			if *d.into, err = time.ParseDuration(v); err != nil {
				return "", bad(d.name, err)
			}
		}
		q.Del(d.name)
	}
	if v := q.Get("prefix"); v != "" && opts.Prefix == "" {
		opts.Prefix = v
	}
	q.Del("prefix")
	if v := q.Get("max_record_bytes"); v != "" && opts.MaxRecordBytes == 0 {
		if opts.MaxRecordBytes, err = strconv.Atoi(v); err != nil {
			return "", bad("max_record_bytes", err)
		}
	}
	q.Del("max_record_bytes")
	if v := q.Get("max_session_bytes"); v != "" && opts.MaxSessionBytes == 0 {
		if opts.MaxSessionBytes, err = strconv.Atoi(v); err != nil {
			return "", bad("max_session_bytes", err)
		}
	}
	q.Del("max_session_bytes")
	u.RawQuery = q.Encode()

	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.MaxRecordBytes == 0 {
		opts.MaxRecordBytes = store.DefaultMaxRecordBytes
	}
	if opts.MaxSessionBytes == 0 {
		opts.MaxSessionBytes = store.DefaultMaxSessionBytes
	}
	if opts.TTL < time.Millisecond || opts.CallTimeout < 0 || opts.MaxRecordBytes < 0 || opts.MaxSessionBytes < 0 {
		return "", errors.New("redisstore: ttl must be at least 1ms; call_timeout, max_record_bytes and max_session_bytes must not be negative")
	}
	return u.String(), nil
}

// redact hides a password in a URL that goes into an error message.
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

func (s *Store) recordKey(key string) string { return s.opts.Prefix + "rec:" + key }
func (s *Store) convKey(conversation string) string {
	return s.opts.Prefix + "conv:" + conversation
}
func (s *Store) lockKey(conversation string) string {
	return s.opts.Prefix + "lock:" + conversation
}

// callContext gives a call the store's deadline unless the caller's is
// earlier, so that no call waits longer than CallTimeout.
func (s *Store) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.opts.CallTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.opts.CallTimeout)
}

func (s *Store) Get(ctx context.Context, key string) (*store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckID("key", key); err != nil {
		return nil, err
	}
	return s.get(ctx, s.recordKey(key), fmt.Sprintf("key %q", key))
}

// Latest is one GET: the conversation key holds its newest record inline.
func (s *Store) Latest(ctx context.Context, conversation string) (*store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckID("conversation", conversation); err != nil {
		return nil, err
	}
	return s.get(ctx, s.convKey(conversation), fmt.Sprintf("conversation %q", conversation))
}

func (s *Store) get(ctx context.Context, redisKey, what string) (*store.Record, error) {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	b, err := s.client.Get(ctx, redisKey).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	if err != nil {
		return nil, s.fail("GET "+what, err)
	}
	if len(b) > s.valueLimit() {
		return nil, fmt.Errorf("redisstore: %s holds %d bytes, over max_record_bytes; it is skipped: %w", redisKey, len(b), store.ErrNotFound)
	}
	var rec store.Record
	if err := json.Unmarshal(b, &rec); err != nil || rec.Key == "" {
		// A value another program wrote under our prefix: a miss, so
		// the caller recomputes and its Put replaces it.
		return nil, fmt.Errorf("redisstore: %s is not a record (%v); it is skipped: %w", redisKey, err, store.ErrNotFound)
	}
	return &rec, nil
}

// valueLimit allows for the base64 and JSON around the Replacement.
func (s *Store) valueLimit() int { return s.opts.MaxRecordBytes*4/3 + 64<<10 }

// Put writes the record and the conversation's newest record in one
// MULTI/EXEC: a reader sees both or neither.
func (s *Store) Put(ctx context.Context, rec *store.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := rec.Check(); err != nil {
		return err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("redisstore: encode record %q: %w", rec.Key, err)
	}
	if len(rec.Replacement)+len(rec.Summary) > s.opts.MaxRecordBytes || len(b) > s.valueLimit() {
		return fmt.Errorf("redisstore: record %q is %d bytes, over the store's limit of %d (max_record_bytes)", rec.Key, len(b), s.opts.MaxRecordBytes)
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	_, err = s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, s.recordKey(rec.Key), b, s.opts.TTL)
		if rec.Conversation != "" {
			p.Set(ctx, s.convKey(rec.Conversation), b, s.opts.TTL)
		}
		return nil
	})
	if err != nil {
		return s.fail(fmt.Sprintf("put %q", rec.Key), err)
	}
	return nil
}

// Lock is SET NX with the lease as the key's expiry: Redis ends the
// lease itself, so a crashed holder's lock goes away with no sweeper.
func (s *Store) Lock(ctx context.Context, conversation string, lease time.Duration) (store.Lock, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckLock(conversation, lease); err != nil {
		return nil, err
	}
	token := rand.Text()
	cctx, cancel := s.callContext(ctx)
	defer cancel()
	ok, err := s.client.SetNX(cctx, s.lockKey(conversation), token, max(lease, time.Millisecond)).Result()
	if err != nil {
		return nil, s.fail(fmt.Sprintf("lock conversation %q", conversation), err)
	}
	if !ok {
		return nil, fmt.Errorf("conversation %q: %w", conversation, store.ErrLocked)
	}
	return &redisLock{s: s, conversation: conversation, token: token}, nil
}

type redisLock struct {
	s            *Store
	conversation string
	token        string
}

// Release compares and deletes in one script. Once the lease has run
// out the key is gone or another holder's, so Release reports the lease
// lost in both cases, as the contract asks.
func (l *redisLock) Release(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, cancel := l.s.callContext(ctx)
	defer cancel()
	n, err := releaseScript.Run(ctx, l.s.client, []string{l.s.lockKey(l.conversation)}, l.token).Int()
	if err != nil {
		return l.s.fail(fmt.Sprintf("release conversation %q", l.conversation), err)
	}
	if n == 0 {
		return fmt.Errorf("conversation %q: %w", l.conversation, store.ErrLeaseLost)
	}
	return nil
}

// Close closes the client's connections. A second Close is a no-op.
func (s *Store) Close() error {
	if err := s.client.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
		return err
	}
	return nil
}

// fail wraps err from the client. A reply of Redis about its own state
// (loading, read-only replica, no master, busy script) and every network
// or deadline error mean the store is unavailable; any other reply
// (wrong type, no permission) is a misconfiguration, named as such.
func (s *Store) fail(op string, err error) error {
	var reply redis.Error
	if errors.As(err, &reply) && !errors.Is(err, redis.ErrClosed) {
		msg := reply.Error()
		for _, transient := range []string{"LOADING", "READONLY", "MASTERDOWN", "TRYAGAIN", "BUSY", "CLUSTERDOWN"} {
			if strings.HasPrefix(msg, transient) {
				return fmt.Errorf("redisstore: %s at %s: %w (%w)", op, s.addr, err, store.ErrUnavailable)
			}
		}
		return fmt.Errorf("redisstore: %s at %s: Redis refused: %w (check the store URL's credentials, db and prefix)", op, s.addr, err)
	}
	return fmt.Errorf("redisstore: %s at %s: %w (%w)", op, s.addr, err, store.ErrUnavailable)
}

var _ store.Store = (*Store)(nil)
