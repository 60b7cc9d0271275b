package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/abi"
)

type noModel struct{}

func (noModel) Complete(context.Context, *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	return nil, abi.Errorf(abi.CodeNoModel, "no model")
}
func (noModel) CountTokens(_ context.Context, s string) (int, error) { return len(s) / 4, nil }
func (noModel) Log(slog.Level, string)                               {}

type model struct {
	noModel
	got *abi.CompleteRequest
}

func (m *model) Complete(_ context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	m.got = req
	return &abi.CompleteResponse{Text: "- fixed it"}, nil
}

var session = []abi.Message{
	{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "fix the typo in README.md"}}},
	{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockToolUse, ID: "1", Name: "Edit", Input: json.RawMessage(`{"file_path":"README.md"}`)}}},
	{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: "1", Text: "ok"}}},
}

func TestOffline(t *testing.T) {
	resp, err := New().Strategy.Summarize(context.Background(), noModel{}, &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: session, ModelAvailable: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- Latest request: fix the typo in README.md", "- Tools: Edit ×1", "- Modified `README.md`"} {
		if !strings.Contains(resp.Summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, resp.Summary)
		}
	}
	if !resp.Offline {
		t.Error("Offline = false")
	}
}

func TestModel(t *testing.T) {
	m := &model{}
	resp, err := New().Strategy.Summarize(context.Background(), m, &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: session, ModelAvailable: true})
	if err != nil || resp.Offline || resp.Summary != "- fixed it\n" {
		t.Fatalf("resp %+v, err %v", resp, err)
	}
	if !strings.Contains(m.got.Messages[0].Content[0].Text, "<transcript>\n[user] fix the typo in README.md") {
		t.Errorf("prompt: %s", m.got.Messages[0].Content[0].Text)
	}
}
