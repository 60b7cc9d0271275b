// Package plug is the plugin of command testplug, importable so the
// benchmarks can link it in-process as the baseline.
package plug

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/sdk"
)

// New returns the plugin called name. With hostile set it also declares
// the misbehaving categories; without, it is a well-behaved plugin that
// passes the conformance kit.
func New(name string, hostile bool) *sdk.Plugin {
	categories := []string{"generic"}
	if hostile {
		categories = append(categories, "noop", "spin", "panic", "hog", "callhost", "exit",
			"fork", "escape", "logflood", "stderrflood", "completeloop")
	}
	return &sdk.Plugin{
		Name:        name,
		Version:     "0.1.0",
		Description: "test plugin of the host's own tests",
		Strategy:    strategy{},
		Truncator:   truncator{},
		Categories:  categories,
	}
}

type strategy struct{}

func (strategy) Summarize(ctx context.Context, host sdk.Host, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
	var b strings.Builder
	if req.Kind == abi.FoldTurnPrefix {
		b.WriteString("Turn so far: ")
	} else {
		b.WriteString("Summary: ")
	}
	if req.PreviousSummary != "" {
		b.WriteString(req.PreviousSummary + " ")
	}
	if req.ModelAvailable {
		resp, err := host.Complete(ctx, &abi.CompleteRequest{System: "Summarize.", Messages: req.Messages, MaxTokens: req.TargetTokens})
		if err != nil {
			return nil, err
		}
		b.WriteString(resp.Text)
		return &abi.SummarizeResponse{Summary: b.String()}, nil
	}
	for _, m := range req.Messages {
		for _, blk := range m.Content {
			if blk.Text == "" {
				continue
			}
			line, _, _ := strings.Cut(blk.Text, "\n")
			fmt.Fprintf(&b, "[%s] %s ", m.Role, cut(line, 80))
		}
	}
	for _, f := range req.FileOps.Modified {
		fmt.Fprintf(&b, "modified %s ", f)
	}
	return &abi.SummarizeResponse{Summary: cut(strings.TrimSpace(b.String()), max(req.TargetTokens, 16)*4), Offline: true}, nil
}

type truncator struct{}

func (truncator) Truncate(ctx context.Context, host sdk.Host, req *abi.TruncateRequest) (*abi.TruncateResponse, error) {
	switch req.Category {
	case "noop":
		return &abi.TruncateResponse{Content: req.Content}, nil
	case "spin":
		for i := 0; ; i++ {
			if i < 0 {
				break
			}
		}
	case "panic":
		panic("asked to panic")
	case "hog":
		var keep [][]byte
		for {
			keep = append(keep, make([]byte, 8<<20))
		}
	case "exit":
		os.Exit(3)
	case "fork", "escape":
		start := forkSleeper
		if req.Category == "escape" {
			start = escapeSleeper
		}
		pid, err := start()
		if err != nil {
			return nil, err
		}
		return &abi.TruncateResponse{Content: []byte(strconv.Itoa(pid))}, nil
	case "logflood":
		// MaxTokens lines of 100 bytes through the log host import.
		line := strings.Repeat("L", 100)
		for range req.MaxTokens {
			host.Log(slog.LevelInfo, line)
		}
		return &abi.TruncateResponse{Content: []byte("logged")}, nil
	case "stderrflood":
		// In writes of 100 lines: go-plugin carries each write as a
		// message of its own.
		chunk := strings.Repeat(strings.Repeat("E", 99)+"\n", 100)
		for range req.MaxTokens / 100 {
			os.Stderr.WriteString(chunk)
		}
		return &abi.TruncateResponse{Content: []byte("printed")}, nil
	case "completeloop":
		// Asks the host's model up to MaxTokens times for two billion
		// tokens each, and answers how many were granted.
		granted := 0
		for range req.MaxTokens {
			if _, err := host.Complete(ctx, &abi.CompleteRequest{MaxTokens: 2_000_000_000, Messages: []abi.Message{{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "more"}}}}}); err != nil {
				break
			}
			granted++
		}
		return &abi.TruncateResponse{Content: []byte(strconv.Itoa(granted))}, nil
	case "callhost":
		host.Log(slog.LevelInfo, "calling the host model")
		resp, err := host.Complete(ctx, &abi.CompleteRequest{Messages: []abi.Message{{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: string(req.Content)}}}}})
		if err != nil {
			return nil, err
		}
		return &abi.TruncateResponse{Content: []byte(resp.Text)}, nil
	}
	if req.MaxTokens <= 0 {
		return nil, abi.Errorf(abi.CodeInvalidRequest, "max_tokens must be positive, got %d", req.MaxTokens)
	}
	n, err := host.CountTokens(ctx, string(req.Content))
	if err != nil {
		return nil, err
	}
	if n <= req.MaxTokens {
		return &abi.TruncateResponse{Content: req.Content}, nil
	}
	notice := fmt.Sprintf("\n[... %d bytes omitted]", len(req.Content))
	keep := req.MaxTokens*4 - len(notice) - 16
	if keep < 0 {
		keep = 0
	}
	head := cut(string(req.Content), keep)
	return &abi.TruncateResponse{
		Content:      []byte(head + notice),
		Truncated:    true,
		OmittedBytes: len(req.Content) - len(head),
	}, nil
}

// cut returns at most n bytes of s without splitting a UTF-8 sequence.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
