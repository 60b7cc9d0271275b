// Package store keeps compactions so that every replica of the proxy or
// the service, and every later request of one conversation, reuses the
// same summary bytes instead of paying the model again.
//
// A Record is one compaction of a conversation's prefix, kept under Key:
// the content hash of the folded prefix and of the settings that shaped
// the summary. A conversation's newest record is also reachable by the
// conversation's ID, so a request finds what to splice in one round trip:
// Latest, then a hash of the request's first FoldedCount messages compared
// with the record's PrefixHash.
//
// Implementations: Memory (tests and single processes), Disk (OpenDisk:
// the embedded default, shared by the processes of one machine) and Redis
// (package redisstore, shared by replicas), all checked by the same
// conformance kit (package storetest). Package storeopen opens the one a
// store URL names, so that this package links no database client.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors of every Store. Implementations wrap them with %w.
var (
	// ErrNotFound: no record under that key or conversation.
	ErrNotFound = errors.New("store: not found")
	// ErrLocked: another holder has the conversation's lock.
	ErrLocked = errors.New("store: conversation is locked")
	// ErrLeaseLost: the lease ran out and someone else took the lock
	// before Release.
	ErrLeaseLost = errors.New("store: lock lease lost")
	// ErrUnavailable: the backing service cannot be reached; callers go
	// on without the store (the proxy forwards uncompacted).
	ErrUnavailable = errors.New("store: unavailable")
)

// MaxIDBytes bounds a record's Key and a conversation's ID: both are
// hashes or short identifiers, and a store must not take an unbounded
// string as a file or key name.
const MaxIDBytes = 1024

// Record is one compaction of a conversation's prefix.
type Record struct {
	// Key is the content hash of the folded prefix and of the settings
	// (strategy, model, targets) that shaped the summary.
	Key string `json:"key"`
	// Conversation identifies the conversation the prefix belongs to.
	Conversation string `json:"conversation"`
	// PrefixHash is the content hash of the first FoldedCount messages
	// alone, as they were sent; a request whose first FoldedCount
	// messages hash to it gets Replacement instead of them.
	PrefixHash  string `json:"prefix_hash"`
	FoldedCount int    `json:"folded_count"`
	// Replacement is the JSON array of messages, in the request's own
	// format, that stands for the folded prefix, byte for byte as it is
	// spliced into every later request.
	Replacement []byte `json:"replacement"`
	// Summary is the summary text inside Replacement.
	Summary      string    `json:"summary"`
	Strategy     string    `json:"strategy"`
	Offline      bool      `json:"offline,omitempty"`
	TokensBefore int       `json:"tokens_before"`
	TokensAfter  int       `json:"tokens_after"`
	CostUSD      float64   `json:"cost_usd"`
	CreatedAt    time.Time `json:"created_at"`
}

// Check reports whether rec can be stored: it needs a Key, and Key and
// Conversation must fit MaxIDBytes. Every Put calls it first.
func (r *Record) Check() error {
	if r == nil {
		return errors.New("store: Put of a nil record")
	}
	if r.Key == "" {
		return errors.New("store: a record needs a key")
	}
	if len(r.Key) > MaxIDBytes {
		return fmt.Errorf("store: record key of %d bytes, over the limit of %d", len(r.Key), MaxIDBytes)
	}
	return CheckID("conversation", r.Conversation)
}

// CheckID reports whether id, a conversation ID or key, fits MaxIDBytes;
// what names it in the error.
func CheckID(what, id string) error {
	if len(id) > MaxIDBytes {
		return fmt.Errorf("store: %s ID of %d bytes, over the limit of %d", what, len(id), MaxIDBytes)
	}
	return nil
}

// Lock is a held per-conversation lock. Its lease ends by itself, so a
// crashed holder does not keep the conversation locked forever.
type Lock interface {
	// Release gives the lock up if this holder still has it. It
	// returns ErrLeaseLost if the lease ran out first, whether or not
	// another holder took the lock meanwhile: whatever the holder did
	// after that moment was unprotected. It never releases another
	// holder's lock.
	Release(ctx context.Context) error
}

// Store keeps compaction records. Implementations are safe for
// concurrent use by many goroutines and, where they share a backend, by
// many processes. Every method honours ctx's deadline and fails with
// ctx's error when ctx is already done. Records returned are the
// caller's own copies. An error that wraps ErrUnavailable means the
// backend could not answer in time: the caller goes on without the
// store rather than failing its request.
type Store interface {
	// Get returns the record under key, or ErrNotFound.
	Get(ctx context.Context, key string) (*Record, error)
	// Latest returns the newest record Put for conversation, or
	// ErrNotFound.
	Latest(ctx context.Context, conversation string) (*Record, error)
	// Put saves rec under rec.Key and makes it the newest record of
	// rec.Conversation.
	Put(ctx context.Context, rec *Record) error
	// Lock takes conversation's lock for at most lease, or returns
	// ErrLocked at once if another holder has it: a caller that finds
	// a conversation locked goes on without compacting rather than
	// waiting for the other holder's summary.
	Lock(ctx context.Context, conversation string, lease time.Duration) (Lock, error)
	// Close releases the store's resources.
	Close() error
}

// CheckLock reports whether Lock's arguments are usable: a positive lease
// and a conversation ID within MaxIDBytes.
func CheckLock(conversation string, lease time.Duration) error {
	if lease <= 0 {
		return fmt.Errorf("store: lock lease of %v: a lease must be positive", lease)
	}
	return CheckID("conversation", conversation)
}
