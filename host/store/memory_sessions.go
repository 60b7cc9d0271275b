package store

import (
	"context"
	"fmt"
)

func (m *Memory) GetSession(ctx context.Context, id string) (*Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return nil, fmt.Errorf("session %q: %w", id, ErrNotFound)
	}
	return cloneSession(s), nil
}

func (m *Memory) PutSession(ctx context.Context, s *Session, ifRevision int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := CheckSession(s.ID, ifRevision); err != nil {
		return 0, err
	}
	if n := sessionSize(s); n > m.maxSessionBytes {
		return 0, tooLarge(s.ID, n, m.maxSessionBytes)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var current int64
	if old, ok := m.sessions[s.ID]; ok {
		current = old.Revision
	}
	if err := checkRevision(s.ID, ifRevision, current); err != nil {
		return 0, err
	}
	c := cloneSession(s)
	c.Revision, c.UpdatedAt = current+1, m.now().UTC()
	m.sessions[s.ID] = c
	return c.Revision, nil
}

func (m *Memory) AppendSession(ctx context.Context, id string, data []byte, ifRevision int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := CheckSession(id, ifRevision); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return 0, fmt.Errorf("session %q: %w", id, ErrNotFound)
	}
	if err := checkRevision(id, ifRevision, s.Revision); err != nil {
		return 0, err
	}
	if n := sessionSize(s) + len(data); n > m.maxSessionBytes {
		return 0, tooLarge(id, n, m.maxSessionBytes)
	}
	// A new slice, so that a copy handed out earlier never sees the
	// append through a shared backing array.
	s.Messages = append(append(make([]byte, 0, len(s.Messages)+len(data)), s.Messages...), data...)
	s.Revision++
	s.UpdatedAt = m.now().UTC()
	return s.Revision, nil
}

func (m *Memory) DeleteSession(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.sessions[id]; !ok {
		return fmt.Errorf("session %q: %w", id, ErrNotFound)
	}
	delete(m.sessions, id)
	return nil
}

var _ Sessions = (*Memory)(nil)
