package store

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"
)

// Memory is a Store in one process's memory, for tests and for a single
// process that need not survive a restart. The zero value is not usable:
// call NewMemory.
type Memory struct {
	mu      sync.Mutex
	records map[string]*Record
	latest  map[string]string // conversation → key
	locks   map[string]memoryLock
	now     func() time.Time

	sessions        map[string]*Session
	maxSessionBytes int
}

type memoryLock struct {
	token   string
	expires time.Time
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{
		records: map[string]*Record{},
		latest:  map[string]string{},
		locks:   map[string]memoryLock{},
		now:     time.Now,

		sessions:        map[string]*Session{},
		maxSessionBytes: DefaultMaxSessionBytes,
	}
}

func (m *Memory) Get(ctx context.Context, key string) (*Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.records[key]
	if !ok {
		return nil, fmt.Errorf("key %q: %w", key, ErrNotFound)
	}
	return clone(rec), nil
}

func (m *Memory) Latest(ctx context.Context, conversation string) (*Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key, ok := m.latest[conversation]
	if !ok {
		return nil, fmt.Errorf("conversation %q: %w", conversation, ErrNotFound)
	}
	return clone(m.records[key]), nil
}

func (m *Memory) Put(ctx context.Context, rec *Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := rec.Check(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records[rec.Key] = clone(rec)
	if rec.Conversation != "" {
		m.latest[rec.Conversation] = rec.Key
	}
	return nil
}

func (m *Memory) Lock(ctx context.Context, conversation string, lease time.Duration) (Lock, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := CheckLock(conversation, lease); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if l, ok := m.locks[conversation]; ok && now.Before(l.expires) {
		return nil, fmt.Errorf("conversation %q: %w", conversation, ErrLocked)
	}
	token := rand.Text()
	m.locks[conversation] = memoryLock{token: token, expires: now.Add(lease)}
	return &memoryHeld{m: m, conversation: conversation, token: token}, nil
}

func (m *Memory) Close() error { return nil }

type memoryHeld struct {
	m            *Memory
	conversation string
	token        string
}

func (h *memoryHeld) Release(context.Context) error {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	l, ok := h.m.locks[h.conversation]
	if !ok || l.token != h.token {
		return ErrLeaseLost
	}
	delete(h.m.locks, h.conversation)
	if h.m.now().After(l.expires) {
		return ErrLeaseLost
	}
	return nil
}

func clone(r *Record) *Record {
	c := *r
	c.Replacement = append([]byte(nil), r.Replacement...)
	return &c
}

var _ Store = (*Memory)(nil)
