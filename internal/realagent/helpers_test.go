package realagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// installHint is the command that installs the pinned agents.
const installHint = "(cd internal/realagent/testdata && npm ci --no-audit --no-fund)"

// agentBin returns the path of an agent's executable installed by npm ci
// in testdata. Locally its absence skips the test; in CI (CI=true) it
// fails it.
func agentBin(t *testing.T, agent Agent) string {
	t.Helper()
	name := map[Agent]string{ClaudeCode: "claude", Codex: "codex"}[agent]
	p, err := filepath.Abs(filepath.Join("testdata", "node_modules", ".bin", name))
	require.NoError(t, err)
	why := ""
	if _, err := os.Stat(p); err != nil {
		why = "the pinned agents are not installed: run " + installHint
		if _, lookErr := exec.LookPath("npm"); lookErr != nil {
			why = "npm is not on PATH, and the pinned agents are not installed: install Node.js 20 and npm, then run " + installHint
		}
	} else if out, err := versionOf(p, t.TempDir()); err != nil {
		// npm ci --ignore-scripts leaves Claude Code's placeholder, which
		// only says that its postinstall did not run.
		why = fmt.Sprintf("%s --version failed (%v): %s; reinstall with %s, scripts allowed", p, err, bytes.TrimSpace(out), installHint)
	}
	if why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s", why)
		}
		t.Skip(why)
	}
	return p
}

// versionOf runs bin --version with a home of its own.
func versionOf(bin, home string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + filepath.Join(home, ".codex"), "CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude")}
	return cmd.CombinedOutput()
}

// corpusPath returns the path of a file of the shared corpus
// (../shared/corpus above the module root), skipping the test when the
// corpus is absent.
func corpusPath(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skipf("no go.mod above %s; cannot find ../shared/corpus", dir)
		}
		dir = parent
	}
	p := filepath.Join(dir, "..", "shared", "corpus", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("corpus file %s not found in ../shared/corpus above the module root; skipping", name)
	}
	return p
}

// strings of a JSON document: every string value, at any depth, each
// decoded once.
func jsonStrings(t *testing.T, doc []byte) map[string]bool {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(doc, &v))
	out := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out[x] = true
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// containsText reports whether some string of set holds text.
func containsText(set map[string]bool, text string) bool {
	if set[text] {
		return true
	}
	for s := range set {
		if strings.Contains(s, text) {
			return true
		}
	}
	return false
}

// records decodes each line of a JSONL file.
func records(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for sc.Scan() {
		var r map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "%s", path)
		out = append(out, r)
	}
	require.NoError(t, sc.Err())
	return out
}

func str(v any) string { s, _ := v.(string); return s }

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

func list(v any) []any { l, _ := v.([]any); return l }

// sessionFacts are what a session file says the agent must send when it
// resumes, read with nothing but encoding/json so that the tests do not
// lean on the readers under test.
type sessionFacts struct {
	// Kept are the tool call IDs the last compaction kept (all of them
	// when there was none); Folded those it folded. A compaction written
	// by compact-host repeats the kept messages after it, which are kept,
	// not folded. Only answered calls count: the agents leave a call
	// without its result out of the request.
	Kept, Folded []string
	// Summary is the last summary as the request carries it: its text, or
	// the ID of Codex's encrypted compaction item.
	Summary string
	// LastUser is the last message the user typed.
	LastUser string
}

// claudeCodeFacts reads a Claude Code session.
func claudeCodeFacts(t *testing.T, path string) sessionFacts {
	var f sessionFacts
	answered := map[string]bool{}
	for _, r := range records(t, path) {
		if str(r["type"]) == "system" && str(r["subtype"]) == "compact_boundary" {
			f.fold(nil)
			continue
		}
		msg := obj(r["message"])
		for _, b := range list(msg["content"]) {
			if str(obj(b)["type"]) == "tool_result" {
				answered[str(obj(b)["tool_use_id"])] = true
			}
		}
		switch str(r["type"]) {
		case "assistant":
			for _, b := range list(msg["content"]) {
				if str(obj(b)["type"]) == "tool_use" {
					f.Kept = append(f.Kept, str(obj(b)["id"]))
				}
			}
		case "user":
			text := str(msg["content"])
			if r["isCompactSummary"] == true {
				f.Summary = text
				for _, b := range list(msg["content"]) {
					f.Summary += str(obj(b)["text"])
				}
				continue
			}
			if text != "" && r["isMeta"] != true && !strings.HasPrefix(text, "<") {
				f.LastUser = text
			}
		}
	}
	f.settle(answered)
	return f
}

// fold starts a new compaction: every call so far is folded, but for the
// ones the compaction kept.
func (f *sessionFacts) fold(kept []string) {
	f.Folded, f.Kept = append(f.Folded, f.Kept...), kept
}

// settle leaves out of Folded the calls that were kept, and out of both
// the calls never answered.
func (f *sessionFacts) settle(answered map[string]bool) {
	f.Folded = without(f.Folded, f.Kept)
	var unanswered []string
	for _, id := range append(f.Kept, f.Folded...) {
		if !answered[id] {
			unanswered = append(unanswered, id)
		}
	}
	f.Kept, f.Folded = without(f.Kept, unanswered), without(f.Folded, unanswered)
}

// without returns the IDs of ids that are not in drop.
func without(ids, drop []string) []string {
	skip := map[string]bool{}
	for _, id := range drop {
		skip[id] = true
	}
	var out []string
	for _, id := range ids {
		if !skip[id] {
			out = append(out, id)
		}
	}
	return out
}

// codexFacts reads a Codex rollout.
func codexFacts(t *testing.T, path string) sessionFacts {
	var f sessionFacts
	answered := map[string]bool{}
	for _, r := range records(t, path) {
		p := obj(r["payload"])
		switch str(r["type"]) {
		case "compacted":
			var kept []string
			f.Summary = str(p["message"])
			for _, it := range list(p["replacement_history"]) {
				switch str(obj(it)["type"]) {
				case "compaction":
					if f.Summary == "" {
						f.Summary = str(obj(it)["id"])
					}
				case "function_call", "custom_tool_call":
					kept = append(kept, str(obj(it)["call_id"]))
				case "function_call_output", "custom_tool_call_output":
					answered[str(obj(it)["call_id"])] = true
				}
			}
			f.fold(kept)
		case "response_item":
			switch str(p["type"]) {
			case "function_call", "custom_tool_call":
				f.Kept = append(f.Kept, str(p["call_id"]))
			case "function_call_output", "custom_tool_call_output":
				answered[str(p["call_id"])] = true
			}
		case "event_msg":
			if str(p["type"]) == "user_message" {
				f.LastUser = str(p["message"])
			}
		}
	}
	f.settle(answered)
	return f
}
