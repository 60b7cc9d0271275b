package recallmcp

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/recall"
	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/internal/recallstore"
)

// Reload bounds of a StoreSource.
const (
	// DefaultMaxAge is how long a StoreSource answers from an index it
	// read before it reads the store again, when nothing says sooner
	// that the conversation grew. Originals are only ever added to, so
	// what an index holds stays true.
	DefaultMaxAge = time.Minute
	// listAge is how long a tenant's list serves: a recall that finds
	// its marker nowhere, or a search, rereads a list older than
	// MinReload; every list read rereads only the conversations it says
	// grew.
	listAge = 2 * time.Second
	// DefaultMinReload is the least time between two reads that a
	// marker the indexes lack can force: of the tenant's list, or of the
	// one conversation of a source without a tenant list. A caller that
	// sends unknown markers in a loop costs one such read this often.
	DefaultMinReload = 250 * time.Millisecond
)

// StoreSource is the originals the compact-host proxy kept in its store
// (package recallstore): of one conversation, or of every recent
// conversation of one tenant, where a marker finds its own conversation
// (markers are keyed per conversation, so a marker resolves in its own
// only). It is safe for concurrent use.
type StoreSource struct {
	Sessions store.Sessions
	// Conversation, when set, is the one conversation answered for.
	Conversation string
	// Tenant, when set, is the tenant answered for: with Conversation,
	// the conversation must be this tenant's; without, every recent
	// conversation of the tenant is.
	Tenant string
	// MaxAge is how long an index read from the store is used;
	// DefaultMaxAge when 0. MinReload is DefaultMinReload when 0.
	MaxAge    time.Duration
	MinReload time.Duration
	// Cache holds the indexes read; sources may share one (the proxy's
	// tenants do), since each entry names its tenant. A source without
	// one makes its own of DefaultCacheBytes.
	Cache *IndexCache

	mu     sync.Mutex
	list   []recallstore.Listed
	listAt time.Time
}

// DefaultCacheBytes bounds an IndexCache whose MaxBytes is 0.
const DefaultCacheBytes = 256 << 20

// IndexCache keeps the indexes StoreSources read, within a bound on the
// originals' size (an index takes about twice its originals' bytes).
// When an index would take the cache past MaxBytes, the indexes read
// longest ago leave first. It is safe for concurrent use.
type IndexCache struct {
	// MaxBytes bounds the originals' bytes of the indexes kept;
	// DefaultCacheBytes when 0.
	MaxBytes int64

	mu      sync.Mutex
	entries map[string]*loadedIndex
	bytes   int64
}

type loadedIndex struct {
	x       *recall.Index
	tenant  string
	size    int64
	through int
	at      time.Time
}

func (c *IndexCache) get(conv string) *loadedIndex {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[conv]
}

func (c *IndexCache) put(conv string, l *loadedIndex) {
	c.mu.Lock()
	defer c.mu.Unlock()
	limit := c.MaxBytes
	if limit <= 0 {
		limit = DefaultCacheBytes
	}
	if c.entries == nil {
		c.entries = map[string]*loadedIndex{}
	}
	if old := c.entries[conv]; old != nil {
		c.bytes -= old.size
		delete(c.entries, conv)
	}
	for c.bytes+l.size > limit && len(c.entries) > 0 {
		var oldest string
		for k, e := range c.entries {
			if oldest == "" || e.at.Before(c.entries[oldest].at) {
				oldest = k
			}
		}
		c.bytes -= c.entries[oldest].size
		delete(c.entries, oldest)
	}
	if l.size <= limit {
		c.entries[conv] = l
		c.bytes += l.size
	}
}

// errNoOriginals: nothing kept for the conversation (never compacted by
// the proxy, or expired). The model reads it.
var errNoOriginals = errors.New("no originals are kept for this conversation (none were folded yet, or they expired from the store)")

// errForeign: the conversation named is another tenant's. It reads as if
// the conversation did not exist, so it tells nothing about it.
var errForeign = errNoOriginals

// Index is the index of the conversation, or of the tenant's newest one.
func (s *StoreSource) Index(ctx context.Context) (*recall.Index, error) {
	convs, err := s.conversations(ctx, listAge)
	if err != nil {
		return nil, err
	}
	return s.index(ctx, convs[0], s.maxAge())
}

// IndexFor is the index of the conversation whose originals hold ref:
// each candidate conversation is tried, newest first, from the indexes
// read last; when none holds it, the list (or the one conversation) is
// read again, if not read within MinReload, and what grew is tried again.
func (s *StoreSource) IndexFor(ctx context.Context, ref string) (*recall.Index, error) {
	if !abi.ValidRef(ref) {
		return nil, recall.ErrBadRef
	}
	var first *recall.Index
	for _, pass := range []struct{ list, index time.Duration }{{listAge, s.maxAge()}, {s.minReload(), s.minReload()}} {
		convs, err := s.conversations(ctx, pass.list)
		if err != nil {
			return nil, err
		}
		for _, c := range convs {
			x, err := s.index(ctx, c, pass.index)
			if err != nil {
				if len(convs) == 1 {
					return nil, err
				}
				continue // an expired conversation of the tenant's list
			}
			if first == nil {
				first = x
			}
			if _, err := x.Recall(ref, 1); !errors.Is(err, recall.ErrUnknownRef) {
				return x, nil
			}
		}
	}
	if first != nil {
		return first, nil // its Recall says the marker is unknown
	}
	return nil, recall.ErrUnknownRef
}

// Search searches every conversation answered for and keeps the best
// hits: the most matches first, then the newest conversation's.
func (s *StoreSource) Search(ctx context.Context, q recall.Query) (recall.Result, error) {
	convs, err := s.conversations(ctx, s.minReload())
	if err != nil {
		return recall.Result{}, err
	}
	var all []recall.Hit
	truncated := false
	for _, c := range convs {
		x, err := s.index(ctx, c, listAge)
		if err != nil {
			if len(convs) == 1 {
				return recall.Result{}, err
			}
			continue
		}
		res, err := x.Search(q)
		if err != nil {
			return recall.Result{}, err // the query's own fault: the same for every index
		}
		all = append(all, res.Hits...)
		truncated = truncated || res.Truncated
	}
	// Stable: hits of newer conversations stay ahead of older ones with
	// as many matches.
	slices.SortStableFunc(all, func(a, b recall.Hit) int { return cmp.Compare(b.Matches, a.Matches) })
	limit := q.Limit
	if limit <= 0 {
		limit = recall.DefaultHits
	}
	return recall.Result{Hits: all[:min(len(all), limit, recall.MaxHits)], Truncated: truncated}, nil
}

func (s *StoreSource) minReload() time.Duration {
	if s.MinReload > 0 {
		return s.MinReload
	}
	return DefaultMinReload
}

func (s *StoreSource) maxAge() time.Duration {
	if s.MaxAge > 0 {
		return s.MaxAge
	}
	return DefaultMaxAge
}

// conversations are the conversations answered for, newest first, with
// the count of messages the list says each has kept (-1: unknown, for the
// one conversation of a source without a tenant list); the tenant's list
// is read again when older than age. Never empty without an error.
func (s *StoreSource) conversations(ctx context.Context, age time.Duration) ([]recallstore.Listed, error) {
	if s.Conversation != "" {
		if err := recallstore.CheckConversation(s.Conversation); err != nil {
			return nil, err
		}
		return []recallstore.Listed{{Conversation: s.Conversation, Through: -1}}, nil
	}
	if s.Tenant == "" {
		return nil, errors.New("the server names no conversation and no tenant")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.list == nil || time.Since(s.listAt) > age {
		list, err := recallstore.List(ctx, s.Sessions, s.Tenant)
		if err != nil && s.list == nil {
			return nil, storeError(err)
		}
		if err == nil {
			s.list, s.listAt = list, time.Now()
		}
	}
	if len(s.list) == 0 {
		return nil, errors.New("no originals are kept for this credential yet: the proxy keeps them when it compacts a conversation")
	}
	return s.list, nil
}

// index is c's index: the one read last, unless the list says the
// conversation grew since, or (with no list) it is older than age, or it
// is older than MaxAge. The store is read outside any lock: two calls may
// read one conversation at once, but no call waits for another tenant's
// read.
func (s *StoreSource) index(ctx context.Context, c recallstore.Listed, age time.Duration) (*recall.Index, error) {
	s.mu.Lock()
	if s.Cache == nil {
		s.Cache = &IndexCache{}
	}
	cache := s.Cache
	s.mu.Unlock()
	l := cache.get(c.Conversation)
	if l != nil && s.Tenant != "" && l.tenant != s.Tenant {
		return nil, errForeign
	}
	if l != nil {
		fresh := time.Since(l.at) <= s.maxAge()
		if c.Through >= 0 {
			fresh = fresh && l.through >= c.Through
		} else {
			fresh = fresh && time.Since(l.at) <= age
		}
		if fresh {
			return l.x, nil
		}
	}
	o, err := recallstore.Load(ctx, s.Sessions, c.Conversation)
	if err != nil {
		if l != nil && !errors.Is(err, store.ErrNotFound) {
			return l.x, nil // the store is down: what was read still holds
		}
		return nil, storeError(err)
	}
	if s.Tenant != "" && o.Tenant != s.Tenant {
		return nil, errForeign
	}
	if len(o.Keys) == 0 {
		return nil, ErrNoConversation
	}
	x := o.Index()
	cache.put(c.Conversation, &loadedIndex{x: x, tenant: o.Tenant, size: o.Bytes, through: o.Through, at: time.Now()})
	return x, nil
}

// storeError is what the model reads of a store's failure: what to do,
// never where the store is.
func storeError(err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errNoOriginals
	case errors.Is(err, recallstore.ErrBadConversation):
		return err
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return errors.New("the store that keeps the originals cannot be read now; try again later")
}

// RefSource is a Source that holds several conversations: it finds the
// one a marker belongs to.
type RefSource interface {
	Source
	IndexFor(ctx context.Context, ref string) (*recall.Index, error)
}

// Searcher is a Source that searches several conversations itself.
type Searcher interface {
	Source
	Search(ctx context.Context, q recall.Query) (recall.Result, error)
}

// indexFor is the index to recall ref from.
func indexFor(ctx context.Context, src Source, ref string) (*recall.Index, error) {
	if rs, ok := src.(RefSource); ok {
		return rs.IndexFor(ctx, ref)
	}
	return src.Index(ctx)
}

// search runs q over src.
func search(ctx context.Context, src Source, q recall.Query) (recall.Result, error) {
	if ss, ok := src.(Searcher); ok {
		return ss.Search(ctx, q)
	}
	x, err := src.Index(ctx)
	if err != nil {
		return recall.Result{}, err
	}
	return x.Search(q)
}

var (
	_ RefSource = (*StoreSource)(nil)
	_ Searcher  = (*StoreSource)(nil)
)
