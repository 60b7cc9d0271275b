package truncate_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/plugins/internal/digest"
	"github.com/compact-host/compact-host/plugins/pluginstest"
	"github.com/compact-host/compact-host/plugins/truncate"
)

func digestOf(t *testing.T, req *abi.SummarizeRequest) string {
	t.Helper()
	host := pluginstest.WithReplies("a model reply the digest must not use")
	resp, err := truncate.New().Strategy.Summarize(context.Background(), host, req)
	if err != nil {
		t.Fatalf("Summarize: %v", err)
	}
	if !resp.Offline {
		t.Error("Offline = false")
	}
	if n := len(host.Requests()); n != 0 {
		t.Errorf("the digest called the model %d times", n)
	}
	return resp.Summary
}

func TestDigestGolden(t *testing.T) {
	s := digestOf(t, &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), PreviousSummary: pluginstest.PreviousSummary, ModelAvailable: true, TargetTokens: 3000})
	pluginstest.Golden(t, "digest", []byte(s))
}

func TestDigestContent(t *testing.T) {
	s := digestOf(t, &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session()})
	for _, want := range []string{
		"1. The CLI crashes with a nil pointer when --config points to a missing file. Fix it and add a test. Don't change the public API of package config.",
		"2. Yes, fix internal/plugin/registry.go the same way, and keep the error messages lowercase.",
		"Bash ×3, Edit ×1, Grep ×1, Read ×1, Write ×1",
		"- `internal/config/load.go`", "- `internal/config/load_test.go`", "- `internal/plugin/registry.go`",
		"--- FAIL: TestLoadMissing",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("digest lacks %q:\n%s", want, s)
		}
	}
}

func TestDigestFitsTarget(t *testing.T) {
	req := &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), PreviousSummary: pluginstest.PreviousSummary}
	full := digestOf(t, req)
	req.TargetTokens = digest.EstimateTokens(full) / 2
	s := digestOf(t, req)
	if digest.EstimateTokens(s) > req.TargetTokens {
		t.Errorf("digest %d tokens, target %d", digest.EstimateTokens(s), req.TargetTokens)
	}
	for _, want := range []string{"keep the error messages lowercase", "`internal/plugin/registry.go`"} {
		if !strings.Contains(s, want) {
			t.Errorf("fitted digest lost %q", want)
		}
	}
}

func TestDigestAlwaysSucceeds(t *testing.T) {
	odd := map[string][]abi.Message{
		"nil":            nil,
		"empty message":  {{}},
		"unknown blocks": {{Role: "robot", Content: []abi.Block{{Type: "hologram"}, {Type: abi.BlockToolResult}}}},
		"bad json":       {{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockToolUse, Name: "Bash", Input: json.RawMessage(`{"command":`)}}}},
		"input not obj":  {{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockToolUse, Name: "Edit", Input: json.RawMessage(`[1,2,3]`)}}}},
		"huge request":   {pluginstest.User(strings.Repeat("please ", 200_000))},
		"binary":         {pluginstest.User("\x00\xff\xfe"), pluginstest.Result("?", "\xff", true)},
	}
	for name, msgs := range odd {
		t.Run(name, func(t *testing.T) {
			s := digestOf(t, &abi.SummarizeRequest{Messages: msgs, TargetTokens: 50, Kind: "whatever"})
			if !strings.HasPrefix(s, truncate.DigestNote) {
				t.Errorf("digest does not open with its note:\n%.300s", s)
			}
		})
	}
}

func TestCategoryFor(t *testing.T) {
	for tool, want := range map[string]string{
		"Bash": truncate.HeadTail, "exec_command": truncate.HeadTail, "run_terminal_cmd": truncate.HeadTail, "SHELL": truncate.HeadTail,
		"Grep": truncate.MatchList, "Glob": truncate.MatchList, "rg": truncate.MatchList, "search": truncate.MatchList,
		"Read": truncate.FileContent, "read_file": truncate.FileContent, "view": truncate.FileContent,
		"WebFetch": truncate.Generic, "": truncate.Generic,
	} {
		if got := truncate.CategoryFor(nil, tool); got != want {
			t.Errorf("CategoryFor(%q) = %q, want %q", tool, got, want)
		}
	}
	custom := map[string]string{"logs": "log"}
	if got := truncate.CategoryFor(custom, "Logs"); got != "log" {
		t.Errorf("override map not used: %q", got)
	}
	info := truncate.New().Info()
	if !info.Has(abi.KindStrategy) || !info.Has(abi.KindTruncator) || len(info.Categories) != 4 {
		t.Errorf("info %+v", info)
	}
}
