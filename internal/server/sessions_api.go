package server

import (
	"encoding/json"
	"time"
)

// The wire types of the session endpoints.

// SessionRequest is the body of PUT /v1/sessions/{id}: the session and
// the options every later append of it is compacted with.
type SessionRequest struct {
	// Session and Format are as in CompactRequest.
	Session json.RawMessage `json:"session"`
	Format  string          `json:"format,omitempty"`
	// Options are kept with the session; dry_run is refused.
	Options CompactOptions `json:"options"`
	// IfRevision, when set, replaces the session only at that revision;
	// 0 only creates it.
	IfRevision *int64 `json:"if_revision,omitempty"`
}

// AppendRequest is the body of POST /v1/sessions/{id}/messages.
type AppendRequest struct {
	// Messages are the new messages: an array in Format.
	Messages json.RawMessage `json:"messages"`
	// Format is canonical (the default), anthropic or openai.
	Format string `json:"format,omitempty"`
	// IfRevision, when set, appends only at that revision.
	IfRevision *int64 `json:"if_revision,omitempty"`
}

// SessionUpdate is the answer of PUT /v1/sessions/{id} and of
// POST /v1/sessions/{id}/messages.
type SessionUpdate struct {
	ID       string `json:"id"`
	Revision int64  `json:"revision"`
	// Created is true when the PUT made a new session.
	Created bool `json:"created,omitempty"`
	// Appended counts the messages an append added.
	Appended int `json:"appended,omitempty"`
	// Action is what the gate did: none, compacted, emergency, pruned
	// or nothing_to_fold.
	Action string `json:"action"`
	// Tokens is the current context's estimate.
	Tokens      int       `json:"tokens"`
	Compactions int       `json:"compactions"`
	UpdatedAt   time.Time `json:"updated_at"`
	// Report is the compaction's report when the gate acted.
	Report   *CompactReport `json:"report,omitempty"`
	Warnings []string       `json:"warnings,omitempty"`
}

// SessionView is the answer of GET /v1/sessions/{id}: the current
// compacted context, ready to send to a model.
type SessionView struct {
	ID           string `json:"id"`
	Revision     int64  `json:"revision"`
	OutputFormat string `json:"output_format"`
	// Messages is a JSON array of messages in OutputFormat.
	Messages json.RawMessage `json:"messages"`
	// System is Anthropic's top-level system prompt, which its messages
	// array cannot hold; absent for the other formats.
	System      json.RawMessage `json:"system,omitempty"`
	Tokens      int             `json:"tokens"`
	Compactions int             `json:"compactions"`
	// Summary is the latest compaction's summary; absent before the first.
	Summary   string    `json:"summary,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
	// Cache is the session's prompt cache and cost report, from the
	// usage its appended assistant messages report.
	Cache *SessionCache `json:"cache"`
}

// SessionDeleted is the answer of DELETE /v1/sessions/{id}.
type SessionDeleted struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}
