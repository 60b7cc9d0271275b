package recallmcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/recall"
	"github.com/compact-host/compact-host/internal/sessionio"
)

// MaxFileBytes bounds the session file a FileSource reads.
const MaxFileBytes = 512 << 20

// FileSource is a session file: an agent's (Claude Code, Codex, any format
// compact-host reads) or a compact-host session log. It is read again when
// it changes, so the server follows an agent that goes on writing. Every
// message of the file is recallable, those behind the agent's own
// compactions and those compact-host folded alike.
type FileSource struct {
	Path string
	// MaxBytes bounds the file; MaxFileBytes when 0.
	MaxBytes int64

	mu    sync.Mutex
	size  int64
	mtime time.Time
	index *recall.Index
}

// Index reads the file if it changed since the last call.
func (f *FileSource) Index(ctx context.Context) (*recall.Index, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	info, err := os.Stat(f.Path)
	if err != nil {
		return nil, errors.New("the session file cannot be read; the server's operator should check --session-file")
	}
	if f.index != nil && info.Size() == f.size && info.ModTime().Equal(f.mtime) {
		return f.index, nil
	}
	limit := f.MaxBytes
	if limit <= 0 {
		limit = MaxFileBytes
	}
	if !info.Mode().IsRegular() || info.Size() > limit {
		return nil, fmt.Errorf("the session file is not a regular file of at most %d bytes", limit)
	}
	file, err := os.Open(f.Path)
	if err != nil {
		return nil, errors.New("the session file cannot be read; the server's operator should check --session-file")
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, limit+1))
	if err != nil || int64(len(data)) > limit {
		return nil, errors.New("the session file cannot be read whole")
	}
	x, err := IndexFile(ctx, data)
	if err != nil {
		return nil, err
	}
	f.index, f.size, f.mtime = x, info.Size(), info.ModTime()
	return x, nil
}

// IndexFile indexes a session file's bytes: its whole history, read as
// compact-host reads it to compact it (so messages get the same IDs), for
// markers keyed by any context the file started from.
func IndexFile(_ context.Context, data []byte) (*recall.Index, error) {
	e, err := host.New(host.Config{ContextWindow: 1 << 30, MaxOutputTokens: 1, Tokenizer: "chars"}, host.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, err
	}
	in, err := sessionio.ReadWith(e, "session file", data, "", sessionio.ReadOptions{FullHistory: true})
	if err != nil {
		return nil, fmt.Errorf("the session file does not read as a session: %v", firstLine(err))
	}
	history := in.Session.Messages()
	var views [][]abi.Message
	if !in.Log {
		if sess, err := formats.Read(bytes.NewReader(data), in.Format); err == nil {
			views = AgentViews(sess)
			if len(sess.Messages) == len(history) {
				history = withReplacements(history, sess.AgentCompactions)
			}
		}
	}
	keys := recall.KeysFor(history, views...)
	if len(keys) == 0 {
		return nil, ErrNoConversation
	}
	return recall.New(history, keys...), nil
}

// AgentViews are the contexts an agent resumed from after each compaction
// recorded in its file (its own, or one compact-host wrote): a compaction
// of such a context keyed its markers by the context's first message.
func AgentViews(sess *formats.Session) [][]abi.Message {
	views := [][]abi.Message{sess.Live()}
	for _, c := range sess.AgentCompactions {
		// As Live lays it out: the summary, unless the replacement
		// holds it, before the replacement's first message that is not
		// an instruction.
		var v []abi.Message
		if c.Summary != "" && !slices.ContainsFunc(c.Replacement, func(m abi.Message) bool { return m.Summary }) {
			v = append(v, abi.Message{Role: abi.RoleUser, Summary: true, Content: []abi.Block{{Type: abi.BlockText, Text: c.Summary}}})
		}
		for _, m := range c.Replacement {
			if m.Role != abi.RoleSystem {
				v = append(v, m)
			}
		}
		views = append(views, v)
	}
	return views
}

// withReplacements puts the history each compaction continued with (the
// copies of kept lines after a Claude Code summary, Codex's replacement
// history) where it began, less the messages history already has: a later
// compaction folded them under their own IDs.
func withReplacements(history []abi.Message, cs []formats.AgentCompaction) []abi.Message {
	seen := make(map[string]bool, len(history))
	for i := range history {
		seen[history[i].ID] = true
	}
	at := map[int][]abi.Message{}
	for _, c := range cs {
		for _, m := range c.Replacement {
			if m.ID != "" && !seen[m.ID] {
				seen[m.ID] = true
				at[c.FirstKept] = append(at[c.FirstKept], m)
			}
		}
	}
	if len(at) == 0 {
		return history
	}
	out := make([]abi.Message, 0, len(history)+len(at))
	for i := range history {
		out = append(out, at[i]...)
		out = append(out, history[i])
	}
	return append(out, at[len(history)]...)
}

func firstLine(err error) string {
	s := err.Error()
	if i := bytes.IndexByte([]byte(s), '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
