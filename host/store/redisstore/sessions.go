package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/compact-host/compact-host/host/store"
	"github.com/redis/go-redis/v9"
)

// The session scripts check the revision and write in one step on the
// server, so that replicas sharing Redis never interleave a
// read-check-write, in one round trip (EVALSHA) each. Replies are
// {revision, 0} on success, {-1, current revision} on a conflict, {-2, 0}
// for a missing session and {-3, size} over the size limit.

// putScript: KEYS meta, messages; ARGV ifRevision, messages, settings,
// latest, compactions, updated_at, ttl in ms, size limit.
var putScript = redis.NewScript(`
local cur = tonumber(redis.call("HGET", KEYS[1], "rev") or "0")
local want = tonumber(ARGV[1])
if want ~= -1 and want ~= cur then return {-1, cur} end
local size = string.len(ARGV[2]) + string.len(ARGV[3])
if size > tonumber(ARGV[8]) then return {-3, size} end
local rev = cur + 1
redis.call("DEL", KEYS[1])
redis.call("HSET", KEYS[1], "rev", rev, "settings", ARGV[3], "latest", ARGV[4], "compactions", ARGV[5], "updated_at", ARGV[6])
redis.call("SET", KEYS[2], ARGV[2], "PX", ARGV[7])
redis.call("PEXPIRE", KEYS[1], ARGV[7])
return {rev, 0}`)

// appendScript: KEYS meta, messages; ARGV data, ifRevision, size limit,
// updated_at, ttl in ms.
var appendScript = redis.NewScript(`
local cur = redis.call("HGET", KEYS[1], "rev")
if not cur then return {-2, 0} end
cur = tonumber(cur)
local want = tonumber(ARGV[2])
if want ~= -1 and want ~= cur then return {-1, cur} end
local size = redis.call("STRLEN", KEYS[2]) + redis.call("HSTRLEN", KEYS[1], "settings") + string.len(ARGV[1])
if size > tonumber(ARGV[3]) then return {-3, size} end
redis.call("APPEND", KEYS[2], ARGV[1])
local rev = redis.call("HINCRBY", KEYS[1], "rev", 1)
redis.call("HSET", KEYS[1], "updated_at", ARGV[4])
redis.call("PEXPIRE", KEYS[1], ARGV[5])
redis.call("PEXPIRE", KEYS[2], ARGV[5])
return {rev, 0}`)

func (s *Store) sessionKeys(id string) []string {
	return []string{s.opts.Prefix + "sess:" + id, s.opts.Prefix + "sessmsg:" + id}
}

// GetSession reads both keys in one MULTI/EXEC: one round trip, and a
// consistent pair even while another replica writes.
func (s *Store) GetSession(ctx context.Context, id string) (*store.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckSession(id, store.AnyRevision); err != nil {
		return nil, err
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	keys := s.sessionKeys(id)
	var meta *redis.MapStringStringCmd
	var msgs *redis.StringCmd
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		meta = p.HGetAll(ctx, keys[0])
		msgs = p.Get(ctx, keys[1])
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.fail(fmt.Sprintf("get session %q", id), err)
	}
	m := meta.Val()
	if len(m) == 0 {
		return nil, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	rev, err := strconv.ParseInt(m["rev"], 10, 64)
	if err != nil || rev < 1 {
		return nil, fmt.Errorf("redisstore: %s is not a session (rev %q); it is skipped: %w", keys[0], m["rev"], store.ErrNotFound)
	}
	sess := &store.Session{ID: id, Revision: rev, LatestRecord: m["latest"]}
	if v := m["settings"]; v != "" {
		sess.Settings = []byte(v)
	}
	sess.Compactions, _ = strconv.Atoi(m["compactions"])
	if ns, err := strconv.ParseInt(m["updated_at"], 10, 64); err == nil {
		sess.UpdatedAt = time.Unix(0, ns).UTC()
	}
	b, err := msgs.Bytes()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.fail(fmt.Sprintf("get session %q", id), err)
	}
	sess.Messages = b
	return sess, nil
}

func (s *Store) PutSession(ctx context.Context, sess *store.Session, ifRevision int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := store.CheckSession(sess.ID, ifRevision); err != nil {
		return 0, err
	}
	if n := len(sess.Messages) + len(sess.Settings); n > s.opts.MaxSessionBytes {
		return 0, fmt.Errorf("redisstore: session %q would be %d bytes, over the limit of %d (max_session_bytes): %w", sess.ID, n, s.opts.MaxSessionBytes, store.ErrSessionTooLarge)
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	reply, err := putScript.Run(ctx, s.client, s.sessionKeys(sess.ID), ifRevision, sess.Messages, sess.Settings,
		sess.LatestRecord, sess.Compactions, time.Now().UnixNano(), s.opts.TTL.Milliseconds(), s.opts.MaxSessionBytes).Int64Slice()
	if err != nil {
		return 0, s.fail(fmt.Sprintf("put session %q", sess.ID), err)
	}
	return s.sessionReply(sess.ID, ifRevision, reply)
}

func (s *Store) AppendSession(ctx context.Context, id string, data []byte, ifRevision int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := store.CheckSession(id, ifRevision); err != nil {
		return 0, err
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	reply, err := appendScript.Run(ctx, s.client, s.sessionKeys(id), data, ifRevision, s.opts.MaxSessionBytes,
		time.Now().UnixNano(), s.opts.TTL.Milliseconds()).Int64Slice()
	if err != nil {
		return 0, s.fail(fmt.Sprintf("append to session %q", id), err)
	}
	return s.sessionReply(id, ifRevision, reply)
}

func (s *Store) sessionReply(id string, ifRevision int64, reply []int64) (int64, error) {
	if len(reply) != 2 {
		return 0, fmt.Errorf("redisstore: session %q: the script answered %v (%w)", id, reply, store.ErrUnavailable)
	}
	switch reply[0] {
	case -1:
		if ifRevision == 0 {
			return 0, fmt.Errorf("session %q already exists, at revision %d: %w", id, reply[1], store.ErrConflict)
		}
		return 0, fmt.Errorf("session %q is at revision %d, not %d: %w", id, reply[1], ifRevision, store.ErrConflict)
	case -2:
		return 0, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	case -3:
		return 0, fmt.Errorf("redisstore: session %q would be %d bytes, over the limit of %d (max_session_bytes): %w", id, reply[1], s.opts.MaxSessionBytes, store.ErrSessionTooLarge)
	}
	return reply[0], nil
}

func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.CheckSession(id, store.AnyRevision); err != nil {
		return err
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	keys := s.sessionKeys(id)
	var del *redis.IntCmd
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		del = p.Del(ctx, keys[0])
		p.Del(ctx, keys[1])
		return nil
	})
	if err != nil {
		return s.fail(fmt.Sprintf("delete session %q", id), err)
	}
	if del.Val() == 0 {
		return fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	return nil
}

var _ store.Sessions = (*Store)(nil)
