// Package recallstore keeps in a compaction store what the proxy's
// compactions folded: the original messages of each folded span, tool
// outputs included, so that a [recall:…] marker of a summary the proxy
// wrote resolves later, on any replica that shares the store.
//
// The originals live in the store's sessions (store.Sessions), so they
// obey its size limit (max_session_bytes) and its expiry (Redis's TTL, the
// disk store's cap on sessions). One session holds a conversation's
// originals, as JSON lines of abi.Message, and the conversation's marker
// keys and tenant; another lists a tenant's newest conversations, so that a
// marker alone, asked within its tenant, finds its conversation.
package recallstore

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/recall"
	"github.com/compact-host/compact-host/host/store"
)

// Session ID prefixes: a conversation's originals, a tenant's list.
const (
	convPrefix   = "recall/"
	tenantPrefix = "recall-tenant/"
)

// MaxTenantConversations bounds a tenant's list: a marker is looked for in
// the tenant's newest conversations only.
const MaxTenantConversations = 64

// maxRetries bounds the rewrites of one Keep that lose a revision race.
const maxRetries = 4

// ErrBadConversation: a conversation ID is not one the proxy makes.
var ErrBadConversation = errors.New("a conversation ID is 64 hex digits, as the proxy's conversations report (GET /_compact-host/conversations) shows it")

// CheckConversation reports whether id has the form of the proxy's
// conversation IDs: a SHA-256 in lower-case hex. Nothing else reaches the
// store, so no ID can name another kind of entry.
func CheckConversation(id string) error {
	if len(id) != 64 {
		return ErrBadConversation
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return ErrBadConversation
		}
	}
	return nil
}

// header is what a conversation's session keeps beside its messages.
type header struct {
	Tenant string   `json:"tenant"`
	Keys   []string `json:"keys"`
	// Through is how many of the conversation's messages (by their place
	// in the requests) are kept, or were passed over as not folded.
	Through int `json:"through"`
}

// Write is what one compaction folded.
type Write struct {
	Tenant       string
	Conversation string
	// Keys are the conversation's marker keys.
	Keys []recall.Key
	// Messages are the folded messages and Positions their places in the
	// request, ascending; Through is the place of the first kept message.
	// Messages before the place the store already holds are skipped.
	Messages  []abi.Message
	Positions []int
	Through   int
}

// Keep adds what w folded to the conversation's originals, and the
// conversation to its tenant's list. It returns how many messages it
// added. An error wrapping store.ErrSessionTooLarge means the originals
// are at the store's size limit: what is kept stays recallable.
func Keep(ctx context.Context, ss store.Sessions, w Write) (int, error) {
	if err := CheckConversation(w.Conversation); err != nil {
		return 0, err
	}
	if len(w.Messages) != len(w.Positions) {
		return 0, errors.New("recallstore: a position for every message")
	}
	id := convPrefix + w.Conversation
	for try := 0; ; try++ {
		cur, err := ss.GetSession(ctx, id)
		var rev int64
		h := header{Tenant: w.Tenant}
		var msgs []byte
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return 0, err
		default:
			rev, msgs = cur.Revision, cur.Messages
			if err := json.Unmarshal(cur.Settings, &h); err != nil || h.Tenant != w.Tenant {
				// Conversation IDs hash the tenant in: this is no
				// write of this conversation's tenant.
				return 0, errors.New("recallstore: the stored conversation has another tenant or no header; left as it is")
			}
		}
		if w.Through <= h.Through {
			return 0, nil
		}
		var add bytes.Buffer
		enc := json.NewEncoder(&add)
		enc.SetEscapeHTML(false)
		n := 0
		for i := range w.Messages {
			if w.Positions[i] < h.Through || w.Positions[i] >= w.Through {
				continue
			}
			if err := enc.Encode(&w.Messages[i]); err != nil {
				return 0, err
			}
			n++
		}
		h.Through = w.Through
		for _, k := range w.Keys {
			if s := hex.EncodeToString(k[:]); !slices.Contains(h.Keys, s) {
				h.Keys = append(h.Keys, s)
			}
		}
		settings, err := json.Marshal(h)
		if err != nil {
			return 0, err
		}
		s := &store.Session{ID: id, Messages: append(append([]byte(nil), msgs...), add.Bytes()...), Settings: settings}
		_, err = ss.PutSession(ctx, s, rev)
		switch {
		case errors.Is(err, store.ErrConflict) && try < maxRetries:
			continue
		case err != nil:
			return 0, err
		}
		if err := addToTenant(ctx, ss, w.Tenant, w.Conversation, h.Through); err != nil {
			return n, err
		}
		return n, nil
	}
}

// addToTenant puts conv at the head of the tenant's list, with the count
// of messages now kept: readers reread a conversation only when it grew.
func addToTenant(ctx context.Context, ss store.Sessions, tenant, conv string, through int) error {
	id := tenantPrefix + tenant
	for try := 0; ; try++ {
		var rev int64
		var list []Listed
		cur, err := ss.GetSession(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		default:
			rev, list = cur.Revision, parseList(cur.Messages)
		}
		list = slices.DeleteFunc(list, func(l Listed) bool { return l.Conversation == conv })
		list = append([]Listed{{conv, through}}, list...)
		list = list[:min(len(list), MaxTenantConversations)]
		var b strings.Builder
		for _, l := range list {
			b.WriteString(l.Conversation + " " + strconv.Itoa(l.Through) + "\n")
		}
		_, err = ss.PutSession(ctx, &store.Session{ID: id, Messages: []byte(b.String())}, rev)
		if errors.Is(err, store.ErrConflict) && try < maxRetries {
			continue
		}
		return err
	}
}

// Listed is a conversation of a tenant's list: Through counts the
// messages kept of it when it was last written.
type Listed struct {
	Conversation string
	Through      int
}

func parseList(b []byte) []Listed {
	var out []Listed
	for _, line := range strings.Split(string(b), "\n") {
		conv, n, _ := strings.Cut(line, " ")
		through, err := strconv.Atoi(n)
		if CheckConversation(conv) != nil || err != nil || len(out) >= MaxTenantConversations {
			continue
		}
		out = append(out, Listed{conv, through})
	}
	return out
}

// List is the tenant's conversations with originals, the most recently
// written first, at most MaxTenantConversations.
func List(ctx context.Context, ss store.Sessions, tenant string) ([]Listed, error) {
	cur, err := ss.GetSession(ctx, tenantPrefix+tenant)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return parseList(cur.Messages), nil
}

// Conversations are the IDs of List.
func Conversations(ctx context.Context, ss store.Sessions, tenant string) ([]string, error) {
	list, err := List(ctx, ss, tenant)
	var out []string
	for _, l := range list {
		out = append(out, l.Conversation)
	}
	return out, err
}

// Originals are one conversation's kept messages.
type Originals struct {
	Tenant   string
	Keys     []recall.Key
	Messages []abi.Message
	// Revision is the store's revision of them, Bytes their size as
	// stored, and Through the count of the conversation's messages they
	// cover (as List gives it).
	Revision int64
	Bytes    int64
	Through  int
}

// Index is the originals ready for Recall and Search.
func (o *Originals) Index() *recall.Index { return recall.New(o.Messages, o.Keys...) }

// Load reads a conversation's originals; an error wrapping
// store.ErrNotFound when the store keeps none (never kept, or expired).
func Load(ctx context.Context, ss store.Sessions, conv string) (*Originals, error) {
	if err := CheckConversation(conv); err != nil {
		return nil, err
	}
	cur, err := ss.GetSession(ctx, convPrefix+conv)
	if err != nil {
		return nil, err
	}
	var h header
	if err := json.Unmarshal(cur.Settings, &h); err != nil {
		return nil, fmt.Errorf("recallstore: the originals' header: %v", err)
	}
	o := &Originals{Tenant: h.Tenant, Revision: cur.Revision, Bytes: int64(len(cur.Messages)), Through: h.Through}
	for _, s := range h.Keys {
		var k recall.Key
		if b, err := hex.DecodeString(s); err != nil || len(b) != len(k) {
			return nil, errors.New("recallstore: the originals' header has a malformed key")
		} else {
			copy(k[:], b)
		}
		o.Keys = append(o.Keys, k)
	}
	dec := json.NewDecoder(bytes.NewReader(cur.Messages))
	for dec.More() {
		var m abi.Message
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("recallstore: the originals do not decode: %v", err)
		}
		o.Messages = append(o.Messages, m)
	}
	return o, nil
}
