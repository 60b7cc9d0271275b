package abi

import (
	"encoding/json"
	"strings"
)

// Roles of a message.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Block types.
const (
	BlockText       = "text"
	BlockThinking   = "thinking"
	BlockToolUse    = "tool_use"
	BlockToolResult = "tool_result"
	BlockImage      = "image"
)

// Message is one message of a conversation in canonical form: a role and
// content blocks in the style of Anthropic's Messages API.
type Message struct {
	// ID is stable for the life of the session; compactions refer to it.
	ID      string  `json:"id,omitempty"`
	Role    string  `json:"role"`
	Content []Block `json:"content"`
	// Pinned messages (rules, the plan) are never folded into a summary.
	Pinned bool `json:"pinned,omitempty"`
	// Summary marks a message the host wrote to stand for folded history.
	Summary bool `json:"summary,omitempty"`
	// Usage is what the provider reported for the call that produced
	// this (assistant) message, when known.
	Usage *Usage `json:"usage,omitempty"`
}

// Text joins the text blocks of m by newlines. A message of one text
// block, the usual case, is returned without a copy.
func (m *Message) Text() string {
	n, only := 0, ""
	for _, b := range m.Content {
		if b.Type == BlockText {
			n, only = n+1, b.Text
		}
	}
	if n <= 1 {
		return only
	}
	parts := make([]string, 0, n)
	for _, b := range m.Content {
		if b.Type == BlockText {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Block is one content block. Which fields are set depends on Type.
type Block struct {
	Type string `json:"type"`
	// Text holds the text of text and thinking blocks, and the content
	// of a tool_result.
	Text string `json:"text,omitempty"`
	// ID and Name identify a tool_use; Input is its arguments.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID links a tool_result to its tool_use.
	ToolUseID string `json:"tool_use_id,omitempty"`
	IsError   bool   `json:"is_error,omitempty"`
	// MediaType and Data hold an image.
	MediaType string `json:"media_type,omitempty"`
	Data      []byte `json:"data,omitempty"`
}

// Usage is a provider's report of the tokens one call consumed.
type Usage struct {
	InputTokens      int `json:"input_tokens"`
	OutputTokens     int `json:"output_tokens"`
	CacheReadTokens  int `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
}

// PromptTokens is the whole input the provider counted: fresh input plus
// cache reads and cache writes.
func (u Usage) PromptTokens() int { return u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens }

// FileOps are the files the conversation read and modified, cumulative
// across compactions. A file read and later modified is only in Modified.
type FileOps struct {
	Read     []string `json:"read,omitempty"`
	Modified []string `json:"modified,omitempty"`
}

// Plugin kinds.
const (
	KindStrategy  = "strategy"
	KindTruncator = "truncator"
)

// Info describes a plugin. Every plugin returns it from its info export
// (wasm) or Info call (process).
type Info struct {
	ABIMajor    int    `json:"abi_major"`
	ABIMinor    int    `json:"abi_minor"`
	Name        string `json:"name"`
	Version     string `json:"version,omitempty"`
	Description string `json:"description,omitempty"`
	// Kinds lists what the plugin implements: "strategy", "truncator" or both.
	Kinds []string `json:"kinds"`
	// Categories lists the tool-output categories a truncator handles.
	Categories []string `json:"categories,omitempty"`
}

// Has reports whether the plugin implements kind.
func (i Info) Has(kind string) bool {
	for _, k := range i.Kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// Summary request kinds.
const (
	// FoldHistory asks for a summary of the older history.
	FoldHistory = "history"
	// FoldTurnPrefix asks for a summary of the start of one long turn
	// whose end is kept verbatim.
	FoldTurnPrefix = "turn_prefix"
)

// SummarizeRequest asks a strategy to summarize messages being folded.
type SummarizeRequest struct {
	// Kind is FoldHistory or FoldTurnPrefix.
	Kind     string    `json:"kind"`
	Messages []Message `json:"messages"`
	// PreviousSummary is the summary of an earlier compaction, to be
	// merged into the new one rather than summarized again.
	PreviousSummary string  `json:"previous_summary,omitempty"`
	FileOps         FileOps `json:"file_ops"`
	// TargetTokens is the size the summary should aim for.
	TargetTokens int `json:"target_tokens"`
	// Focus is optional text from the user saying what to keep.
	Focus string `json:"focus,omitempty"`
	// ModelAvailable says whether OpComplete will reach a model. When it
	// is false a strategy runs its offline mode.
	ModelAvailable bool `json:"model_available"`
	// Markers (ABI 1.1) name what the summary stands for: the folded span
	// and the large tool outputs in it. A strategy may place them where
	// they belong (AppendMarkers adds the ones it left out); the host adds
	// any the summary lacks, so a strategy built for ABI 1.0 needs nothing.
	Markers []Marker `json:"markers,omitempty"`
}

// Marker kinds.
const (
	// MarkerSpan stands for the messages a compaction folds.
	MarkerSpan = "span"
	// MarkerToolOutput stands for one tool output in the folded span.
	MarkerToolOutput = "tool_output"
)

// Marker is one reference a summary carries to what it folds, written in
// the summary as Text: "[recall:REF]". A model that has the recall tool
// gives REF back to read the original.
type Marker struct {
	// Ref is "s-" and hex for a span, "t-" and hex for a tool output.
	Ref string `json:"ref"`
	// Kind is MarkerSpan or MarkerToolOutput.
	Kind string `json:"kind"`
	// ToolName is the tool that produced a tool output.
	ToolName string `json:"tool_name,omitempty"`
	// Bytes is the size of the original: the tool output, or the text of
	// the folded span.
	Bytes int `json:"bytes,omitempty"`
}

// Text is the marker as a summary carries it.
func (m Marker) Text() string { return "[recall:" + m.Ref + "]" }

// SummarizeResponse is a strategy's answer.
type SummarizeResponse struct {
	Summary string `json:"summary"`
	// Offline is true when the summary was built without a model.
	Offline bool `json:"offline,omitempty"`
}

// TruncateRequest asks a truncator to shorten one tool output.
type TruncateRequest struct {
	Category string `json:"category"`
	ToolName string `json:"tool_name,omitempty"`
	Content  []byte `json:"content"`
	// MaxTokens is the size the output must fit in, notice included.
	MaxTokens int `json:"max_tokens"`
}

// TruncateResponse is a truncator's answer.
type TruncateResponse struct {
	Content   []byte `json:"content"`
	Truncated bool   `json:"truncated"`
	// OmittedBytes and OmittedLines say how much was cut.
	OmittedBytes int `json:"omitted_bytes,omitempty"`
	OmittedLines int `json:"omitted_lines,omitempty"`
}

// CompleteRequest asks the host for a model completion (OpComplete).
type CompleteRequest struct {
	System    string    `json:"system,omitempty"`
	Messages  []Message `json:"messages"`
	MaxTokens int       `json:"max_tokens,omitempty"`
}

// CompleteResponse is the host's answer to OpComplete.
type CompleteResponse struct {
	Text  string `json:"text"`
	Usage Usage  `json:"usage"`
	Model string `json:"model,omitempty"`
}

// CountTokensRequest asks the host to count tokens (OpCountTokens).
type CountTokensRequest struct {
	Text string `json:"text"`
}

// CountTokensResponse is the host's answer to OpCountTokens.
type CountTokensResponse struct {
	Tokens int `json:"tokens"`
}
