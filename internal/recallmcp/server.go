// Package recallmcp is the Model Context Protocol server of `compact-host
// mcp`: the tools recall and search over one conversation's originals
// (package host/recall), for any agent that speaks MCP, over stdio or
// streamable HTTP.
package recallmcp

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/compact-host/compact-host/host/recall"
)

// Tool names, as an agent sees them (Claude Code shows them as
// mcp__compact-host__recall; Codex as compact-host.recall).
const (
	ToolRecall = "recall"
	ToolSearch = "search"
	// ServerName is the server's name in the MCP handshake, and the name
	// the agents' configurations in README use.
	ServerName = "compact-host"
)

// MaxBodyBytes bounds one HTTP request body: a tool call is a reference or
// a query of at most recall.MaxQueryBytes.
const MaxBodyBytes = 1 << 20

// Source gives the index of the conversation the server answers for. It
// is called on every tool call, so a source may reload what changed; it
// must be safe for concurrent use. Its errors reach the model: they say
// what is wrong, and never where the originals live.
type Source interface {
	Index(ctx context.Context) (*recall.Index, error)
}

// RecallInput is the input of the recall tool.
type RecallInput struct {
	Ref  string `json:"ref" jsonschema:"the reference inside a [recall:…] marker of the summary, e.g. s-1a2b… or t-3c4d…, or the ref of a search hit"`
	Page int    `json:"page,omitempty" jsonschema:"page to read, from 1 (default 1); a long original comes in pages of 16 KB"`
}

// SearchInput is the input of the search tool.
type SearchInput struct {
	Query  string `json:"query" jsonschema:"text to find, case-insensitive (at most 1024 bytes); with regexp, an RE2 regular expression"`
	Regexp bool   `json:"regexp,omitempty" jsonschema:"read query as an RE2 regular expression"`
	Limit  int    `json:"limit,omitempty" jsonschema:"most hits to return (default 10, at most 50)"`
}

// NewServer is the MCP server of src, with the tools recall and search.
func NewServer(src Source, version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: ServerName, Version: version}, &mcp.ServerOptions{
		Instructions: "The conversation's summary names what it folded with markers such as [recall:s-…] and [recall:t-…]. " +
			"Call recall with the reference to read the original messages or tool output; call search to find where something was said.",
	})
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)}
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolRecall,
		Description: "Read the original messages or tool output that a [recall:REF] marker of the conversation's summary stands for, word for word. Give REF (e.g. s-1a2b… or t-3c4d…); long originals come in pages.",
		Annotations: readOnly,
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in RecallInput) (*mcp.CallToolResult, any, error) {
		ref := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(in.Ref), "[recall:"), "]")
		x, err := indexFor(ctx, src, ref)
		if err != nil {
			return nil, nil, err
		}
		page := max(in.Page, 1)
		p, err := x.Recall(ref, page)
		if err != nil {
			return nil, nil, err
		}
		head := "[recall:" + p.Ref + "] page " + strconv.Itoa(p.Page) + " of " + strconv.Itoa(p.Pages) + ", " + strconv.Itoa(p.Bytes) + " bytes in all\n"
		return text(head + p.Text), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolSearch,
		Description: "Search the conversation's original messages and tool outputs, including those the summary folded. Returns the best hits, each with a reference to recall and a snippet.",
		Annotations: readOnly,
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in SearchInput) (*mcp.CallToolResult, any, error) {
		res, err := search(ctx, src, recall.Query{Text: in.Query, Regexp: in.Regexp, Limit: in.Limit})
		if err != nil {
			return nil, nil, err
		}
		return text(FormatResult(res)), nil, nil
	})
	return s
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// FormatResult writes a search's hits one a line: the marker to recall,
// who said it, the count of matches and the snippet; then, when the
// search stopped at its bounds, a line that says so.
func FormatResult(res recall.Result) string {
	var b strings.Builder
	if len(res.Hits) == 0 {
		b.WriteString("no match\n")
	}
	for _, h := range res.Hits {
		who := h.Role
		if h.Tool != "" {
			who += ", " + h.Tool
		}
		fmt.Fprintf(&b, "[recall:%s] (%s, %d matches) %s\n", h.Ref, who, h.Matches, h.Snippet)
	}
	if res.Truncated {
		b.WriteString("[search stopped at its bound of work: these are the best of the latest blocks only; put a rarer word of what you look for in the query to search all of them]\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// HTTPOptions configure Handler.
type HTTPOptions struct {
	// Tokens, when not empty, are the bearer tokens a request must carry.
	Tokens []string
	Logger *slog.Logger
}

// Handler serves s over streamable HTTP at every path, with bodies of at
// most MaxBodyBytes and, when o.Tokens is set, a bearer token required.
func Handler(s *mcp.Server, o HTTPOptions) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Logger: o.Logger})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(o.Tokens) > 0 && !authorized(r, o.Tokens) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="compact-host mcp"`)
			http.Error(w, "a bearer token of --token-file is required", http.StatusUnauthorized)
			return
		}
		if r.ContentLength > MaxBodyBytes {
			http.Error(w, "request body over "+strconv.Itoa(MaxBodyBytes)+" bytes", http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		h.ServeHTTP(w, r)
	})
}

func authorized(r *http.Request, tokens []string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	match := 0
	for _, t := range tokens {
		match |= subtle.ConstantTimeCompare([]byte(got), []byte(t))
	}
	return match == 1
}

// ErrNoConversation: the source has no conversation to answer for.
var ErrNoConversation = errors.New("no conversation to recall from: it has no message yet")
