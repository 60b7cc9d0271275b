package structured_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/plugins/internal/digest"
	"github.com/compact-host/compact-host/plugins/pluginstest"
	"github.com/compact-host/compact-host/plugins/structured"
)

// corpusDir holds real agent sessions beside the repository (shared/corpus).
var corpusDir = filepath.Join("..", "..", "..", "shared", "corpus")

// corpusSessions are the sessions of corpusDir and of corpus-new beside
// it, less a Roo Code ui_messages.json, the UI's log of a task.
func corpusSessions() []string {
	files, _ := filepath.Glob(filepath.Join(corpusDir, "*"))
	newer, _ := filepath.Glob(filepath.Join(corpusDir, "..", "corpus-new", "*"))
	for _, f := range newer {
		if !strings.HasSuffix(f, ".ui_messages.json") {
			files = append(files, f)
		}
	}
	return files
}

// TestCorpus folds each real session at several points and checks that the
// offline summary, under a tight target, names every file the folded part
// modified and quotes the latest user request of the folded part.
//
// The test's own oracle decides what was modified: the calls of file-editing
// tools (Edit, Write, MultiEdit, NotebookEdit, create, edit, str_replace
// editors) and the files an apply_patch patch names. The summary gets no
// FileOps from the host, so it must find them in the messages itself.
func TestCorpus(t *testing.T) {
	files := corpusSessions()
	if len(files) == 0 {
		t.Skipf("no sessions in %s: the shared corpus is not checked out beside the repository", corpusDir)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			s, err := formats.ReadFile(path)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			msgs := s.Messages
			for _, frac := range []int{3, 2, 1} { // fold the first third, half, all
				folded := msgs[:len(msgs)/frac]
				resp, err := structured.New().Strategy.Summarize(context.Background(), pluginstest.NoModel(),
					&abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: folded, TargetTokens: 2000})
				if err != nil {
					t.Fatalf("Summarize: %v", err)
				}
				sectionOrder(t, resp.Summary)
				modified := oracleModified(folded)
				for _, f := range modified {
					if !strings.Contains(resp.Summary, f) {
						t.Errorf("fold 1/%d: summary does not name modified file %s", frac, f)
					}
				}
				req, ok := oracleRequest(folded)
				if !ok {
					t.Logf("fold 1/%d: no user request in %d messages", frac, len(folded))
					continue
				}
				head := digest.ClipHead(digest.OneLine(req), 300)
				head = strings.TrimSuffix(head, "…")
				if !strings.Contains(unquote(resp.Summary), head) {
					t.Errorf("fold 1/%d: summary does not quote the latest request %q", frac, head)
				}
				t.Logf("fold 1/%d: %d messages, %d modified files, summary %d tokens", frac, len(folded), len(modified), digest.EstimateTokens(resp.Summary))
			}
		})
	}
}

// oracleModified lists the files file-editing tools changed in msgs.
func oracleModified(msgs []abi.Message) []string {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type != abi.BlockToolUse {
				continue
			}
			var in map[string]any
			var raw string
			if json.Unmarshal(b.Input, &in) != nil {
				json.Unmarshal(b.Input, &raw)
			}
			str := func(k string) string { s, _ := in[k].(string); return s }
			switch strings.ToLower(b.Name) {
			case "edit", "multiedit", "write", "create", "notebookedit", "write_file", "edit_file":
				add(str("file_path") + str("path") + str("notebook_path"))
			case "str_replace_editor", "str_replace_based_edit_tool":
				if str("command") != "view" {
					add(str("path"))
				}
			case "apply_patch":
				patch := raw + str("input") + str("patch")
				for _, line := range strings.Split(patch, "\n") {
					for _, p := range []string{"*** Add File: ", "*** Update File: ", "*** Delete File: "} {
						if rest, ok := strings.CutPrefix(line, p); ok {
							add(strings.TrimSpace(rest))
						}
					}
				}
			}
		}
	}
	return out
}

// oracleRequest finds the last message a person typed: a user message of
// text only, not a summary, not harness context the agents inject.
func oracleRequest(msgs []abi.Message) (string, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if t, ok := abi.RequestText(msgs[i]); ok && !(i > 0 && msgs[i-1].Role == abi.RoleAssistant && strings.Contains(t, "(Current directory: ")) {
			return t, true
		}
	}
	return "", false
}

// unquote undoes the block quoting of the active task and joins lines.
func unquote(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(strings.TrimPrefix(l, "> "), ">")
	}
	return digest.OneLine(strings.Join(lines, "\n"))
}

// BenchmarkCorpusOffline summarizes the first third and the first half of
// the largest corpus session offline, in process, with the engine's
// summary target at a 200k window (8,000 tokens).
//
//	go test -run '^$' -bench CorpusOffline ./plugins/structured/
func BenchmarkCorpusOffline(b *testing.B) {
	files := corpusSessions()
	if len(files) == 0 {
		b.Skipf("no sessions in %s", corpusDir)
	}
	largest, size := "", int64(-1)
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && st.Size() > size {
			largest, size = f, st.Size()
		}
	}
	s, err := formats.ReadFile(largest)
	if err != nil {
		b.Fatal(err)
	}
	for _, frac := range []int{3, 2} {
		folded := s.Messages[:len(s.Messages)/frac]
		req := &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: folded, TargetTokens: 8000}
		b.Run(fmt.Sprintf("%s/messages=%d", filepath.Base(largest), len(folded)), func(b *testing.B) {
			for b.Loop() {
				if _, err := structured.New().Strategy.Summarize(context.Background(), pluginstest.NoModel(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLongSession summarizes a session of 10,000 messages offline,
// in process (BenchmarkBuiltinStrategies10k in host/plugin runs it over
// wasm too).
//
//	go test -run '^$' -bench LongSession ./plugins/structured/
func BenchmarkLongSession(b *testing.B) {
	req := &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.LongSession(10000), TargetTokens: 8000}
	for b.Loop() {
		if _, err := structured.New().Strategy.Summarize(context.Background(), pluginstest.NoModel(), req); err != nil {
			b.Fatal(err)
		}
	}
}
