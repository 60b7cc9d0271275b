package structured_test

import (
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/plugins/internal/digest"
	"github.com/compact-host/compact-host/plugins/pluginstest"
	"github.com/compact-host/compact-host/plugins/structured"
)

type args = pluginstest.Args

var (
	user      = pluginstest.User
	assistant = pluginstest.Assistant
	call      = pluginstest.Call
	result    = pluginstest.Result
)

func offline(t *testing.T, msgs []abi.Message, target int) string {
	t.Helper()
	resp := summarize(t, pluginstest.NoModel(), &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: msgs, TargetTokens: target})
	require.True(t, resp.Offline)
	sectionOrder(t, resp.Summary)
	return resp.Summary
}

// longRequest is a pasted plan of n numbered lines.
func longRequest(n int) string {
	var b strings.Builder
	b.WriteString("Implement the following plan:\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d. step %03d: change the handler for case %d and keep its test green\n", i, i, i)
	}
	return b.String()
}

// The request in progress is at the top, in full, once: a 150-line
// request (about 10 KB) loses no line and none is written twice.
func TestRequestInProgressInFullOnce(t *testing.T) {
	req := longRequest(150)
	msgs := []abi.Message{
		user("no remove this again, it was fine before"),
		assistant("Removed."),
		user(req),
		assistant("I'll start with step 1.", call("e1", "Edit", args{"file_path": "h.go", "old_string": "a", "new_string": "b"})),
		result("e1", "ok", false),
	}
	s := offline(t, msgs, 8000)
	task := section(t, s, structured.ActiveTask)
	assert.Contains(t, task, "request in progress")
	for i := 1; i <= 150; i++ {
		line := fmt.Sprintf("step %03d:", i)
		assert.Contains(t, task, line, "the active task lost a line of the request")
		assert.Equal(t, 1, strings.Count(s, line), "line %q of the request is written more than once", line)
	}
	assert.NotContains(t, task, "no remove this again", "an older request took the place of the one in progress")
	assert.Less(t, strings.Index(s, "step 001"), strings.Index(s, "## "+structured.NextStep), "the request is not at the top")
}

// A request past the cap keeps its head and tail and says how much it
// left out.
func TestHugeRequestSaysWhatItClipped(t *testing.T) {
	req := longRequest(2000) // about 130 KB
	s := offline(t, []abi.Message{user(req)}, 8000)
	task := section(t, s, structured.ActiveTask)
	assert.Contains(t, task, "step 001:")
	assert.Contains(t, task, "step 2000:")
	assert.Regexp(t, `\[… \d+ of the request's 2001 lines \(\d+ of \d+ bytes\) left out here`, task)
	assert.Less(t, len(task), 40_000, "the clipped request is not bounded")
}

// The next step comes from the agent's own plan, its last stated
// intention and the failures not fixed since.
func TestNextStep(t *testing.T) {
	t.Run("TodoWrite", func(t *testing.T) {
		msgs := []abi.Message{
			user("Add retries to the fetcher."),
			assistant("", call("t1", "TodoWrite", args{"todos": []args{
				{"content": "Read fetcher.go", "status": "completed", "activeForm": "Reading"},
				{"content": "Add a retry loop with backoff", "status": "in_progress", "activeForm": "Adding"},
				{"content": "Write TestFetchRetries", "status": "pending", "activeForm": "Writing"},
			}})),
			result("t1", "Todos have been modified successfully.", false),
			assistant("", call("b1", "Bash", args{"command": "go test ./fetch/..."})),
			result("b1", "--- FAIL: TestFetch (0.00s)\n    fetch_test.go:12: timeout\nFAIL", true),
			assistant("Now add the backoff to `Fetch`:"),
		}
		next := section(t, offline(t, msgs, 4000), structured.NextStep)
		assert.Contains(t, next, "[in_progress] Add a retry loop with backoff")
		assert.Contains(t, next, "[pending] Write TestFetchRetries")
		assert.NotContains(t, next, "Read fetcher.go", "a finished step is listed as next")
		assert.Contains(t, next, "1 of 3 steps done")
		assert.Contains(t, next, "Now add the backoff to `Fetch`.")
		assert.Contains(t, next, "Not fixed yet:")
		assert.Contains(t, next, "--- FAIL: TestFetch")
	})
	t.Run("update_plan", func(t *testing.T) {
		msgs := []abi.Message{
			user("Migrate the config loader."),
			assistant("", call("p1", "update_plan", args{"plan": []args{
				{"step": "Inspect loader", "status": "completed"}, {"step": "Patch loader to read TOML", "status": "in_progress"},
			}})),
			result("p1", "Plan updated", false),
		}
		next := section(t, offline(t, msgs, 4000), structured.NextStep)
		assert.Contains(t, next, "[in_progress] Patch loader to read TOML")
	})
	t.Run("TaskCreate and TaskUpdate", func(t *testing.T) {
		msgs := []abi.Message{
			user("Fix the turn-end bug."),
			assistant("", call("c1", "TaskCreate", args{"subject": "Add TurnEndHandler", "description": "x"}),
				call("c2", "TaskCreate", args{"subject": "Write the tests", "description": "y"})),
			result("c1", "Task #1 created", false), result("c2", "Task #2 created", false),
			assistant("", call("u1", "TaskUpdate", args{"taskId": "1", "status": "completed"}), call("u2", "TaskUpdate", args{"taskId": "2", "status": "in_progress"})),
			result("u1", "Updated", false), result("u2", "Updated", false),
		}
		next := section(t, offline(t, msgs, 4000), structured.NextStep)
		assert.Contains(t, next, "[in_progress] Write the tests")
		assert.NotContains(t, next, "Add TurnEndHandler")
	})
	t.Run("fixed failure is not next", func(t *testing.T) {
		s := offline(t, pluginstest.Session(), 4000)
		next := section(t, s, structured.NextStep)
		assert.NotContains(t, next, "TestLoadMissing", "a failure fixed later is listed as to do")
		assert.Contains(t, section(t, s, structured.PendingItems), "fixed: `Bash go test ./internal/config/...` passed later")
	})
}

// mini-swe-agent trajectories before tool calls: the action is a shell
// block in the assistant's text, the output comes back as user text.
func TestMiniSWEAgentTextActions(t *testing.T) {
	msgs := []abi.Message{
		{Role: abi.RoleSystem, Content: []abi.Block{{Type: abi.BlockText, Text: "You are a helpful assistant."}}},
		user("<pr_description>\nThe parser crashes on empty input.\n</pr_description>\nFix it in the source."),
		assistant("THOUGHT: find the parser.\n\n```bash\ncat src/parser.py\n```"),
		user("<returncode>0</returncode>\n<output>\ndef parse(s):\n    return s[0]\n</output>"),
		assistant("THOUGHT: guard the empty case.\n\n```bash\nsed -i 's/return s\\[0\\]/return s[0] if s else None/' src/parser.py\n```"),
		user("<returncode>0</returncode>\n<output>\n</output>"),
		assistant("THOUGHT: run the tests.\n\n```bash\npython -m pytest tests/test_parser.py\n```"),
		user("<returncode>1</returncode>\n<output>\nE   AssertionError: expected ''\nFAILED tests/test_parser.py::test_empty\n</output>"),
		assistant("Please always provide EXACTLY ONE action"),
		user("Please always provide EXACTLY ONE action in triple backticks, found 0 actions."),
	}
	s := offline(t, msgs, 4000)
	task := section(t, s, structured.ActiveTask)
	assert.Contains(t, task, "The parser crashes on empty input.")
	assert.NotContains(t, task, "returncode", "a command output became the task")
	assert.NotContains(t, task, "EXACTLY ONE action", "a format reminder became the task")
	files := section(t, s, structured.FilesArtifacts)
	assert.Contains(t, files, "Modified:\n- `src/parser.py`")
	next := section(t, s, structured.NextStep)
	assert.Contains(t, next, "python -m pytest tests/test_parser.py")
}

// Per modified file: created or deleted, and the definitions added,
// changed and removed, from Edit strings and apply_patch hunks.
func TestFileChanges(t *testing.T) {
	patch := "*** Begin Patch\n*** Update File: src/store.ts\n@@\n-export function load(path: string) {\n+export function load(path: string, opts: Options) {\n+export interface Options { retries: number }\n*** Add File: src/cache.ts\n+export class Cache {\n+}\n*** Delete File: src/legacy.ts\n*** End Patch"
	msgs := []abi.Message{
		user("Refactor the store."),
		assistant("", call("e1", "Edit", args{"file_path": "store.go", "old_string": "func Open(p string) (*Store, error) {\n\treturn nil, nil\n}\n\nfunc legacy() {}", "new_string": "func Open(p string) (*Store, error) {\n\treturn open(p)\n}\n\ntype Options struct{ Retries int }"})),
		result("e1", "ok", false),
		assistant("", call("w1", "Write", args{"file_path": "store_test.go", "content": "package store\n\nfunc TestOpen(t *testing.T) {}\n"})),
		result("w1", "File created", false),
		assistant("", call("p1", "apply_patch", patch)),
		result("p1", "Done", false),
		assistant("", call("x1", "Edit", args{"file_path": "broken.go", "old_string": "a", "new_string": "b"})),
		result("x1", "String to replace not found", true),
	}
	files := section(t, offline(t, msgs, 4000), structured.FilesArtifacts)
	for _, want := range []string{
		"`store.go`: added `Options`; changed `Open`; removed `legacy`",
		"`store_test.go`: created; added `TestOpen`",
		"`src/store.ts`: added `Options`; changed `load`",
		"`src/cache.ts`: created; added `Cache`",
		"`src/legacy.ts`: deleted",
	} {
		assert.Contains(t, files, want)
	}
	assert.NotContains(t, files, "broken.go: ", "a failed edit is reported as a change")
}

// Decisions carry their labels: a decision the user turned down is not
// listed as taken, an introduction ("Now fix the test:") is not a
// decision, and emphasis cut from a line does not break the markdown.
func TestDecisionsLabelled(t *testing.T) {
	msgs := []abi.Message{
		user("Speed up the resolver."),
		assistant("I decided to add a global cache instead of memoizing per request, because lookups repeat across requests."),
		user("no, don't add a global cache, memoize per request"),
		assistant("**Root cause**: the resolver re-reads the index on every lookup because nothing is kept between calls.\nNow fix the test:"),
	}
	s := offline(t, msgs, 4000)
	d := section(t, s, structured.KeyDecisions)
	assert.Contains(t, d, "- Rejected, turned down by the user: “no, don't add a global cache, memoize per request”. It had said: I decided to add a global cache")
	assert.NotContains(t, d, "- Decided: I decided to add a global cache", "a turned-down option is listed as a decision")
	assert.Contains(t, d, "- Cause: **Root cause**: the resolver re-reads the index")
	assert.NotContains(t, d, "Now fix the test", "an introduction is listed as a decision")
	for _, l := range strings.Split(s, "\n") {
		assert.True(t, digest.Balanced(l), "unbalanced markup: %q", l)
	}
}

// Images are noted with their kind and size, base64 data is not copied.
func TestImagesNoted(t *testing.T) {
	png := make([]byte, 75<<10)
	data := base64.StdEncoding.EncodeToString(png)
	msgs := []abi.Message{
		{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "What is wrong on this screen?"}, {Type: abi.BlockImage, MediaType: "image/png", Data: png}}},
		assistant("", call("v1", "view_image", args{"path": "shot.png"})),
		result("v1", "data:image/jpeg;base64,"+data, false),
	}
	s := offline(t, msgs, 4000)
	files := section(t, s, structured.FilesArtifacts)
	assert.Contains(t, files, "image/png, 75 KB")
	assert.Contains(t, files, "image/jpeg, 100 KB")
	assert.NotContains(t, s, data[:100], "base64 data copied into the summary")
	assert.Contains(t, digest.Render(msgs, 0), "[image/jpeg data left out, 100 KB of base64]")
}

// Over the real sessions, folded at three points: no line written twice,
// every line's inline markup closed, the summary within its target apart
// from what is never dropped.
func TestCorpusSummariesClean(t *testing.T) {
	files := corpusSessions()
	if len(files) == 0 {
		t.Skipf("no sessions in %s", corpusDir)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			s, err := formats.ReadFile(path)
			require.NoError(t, err)
			for _, frac := range []int{3, 2, 1} {
				summary := offline(t, s.Messages[:len(s.Messages)/frac], 8000)
				seen := map[string]bool{}
				inCode := false
				for _, l := range strings.Split(summary, "\n") {
					if strings.HasPrefix(l, ">") {
						continue // the request, verbatim
					}
					if strings.HasPrefix(strings.TrimSpace(l), "```") {
						inCode = !inCode
						continue
					}
					if inCode {
						continue
					}
					assert.True(t, digest.Balanced(l), "fold 1/%d: unbalanced markup: %q", frac, l)
					key := strings.TrimPrefix(strings.TrimSpace(l), "- ")
					if len(key) < 24 {
						continue
					}
					assert.False(t, seen[key], "fold 1/%d: line written twice: %q", frac, key)
					seen[key] = true
				}
			}
		})
	}
}

// A merge keeps what the previous summary said changed in a file the
// folded messages did not touch again.
func TestMergeKeepsEarlierFileChanges(t *testing.T) {
	prev := "## Active Task\n> Add the cache.\n\n## Files & Artifacts\nModified:\n- `cache.go`: created; added `Cache`, `Cache.Get`\n"
	resp := summarize(t, pluginstest.NoModel(), &abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: pluginstest.Session(), PreviousSummary: prev, TargetTokens: 4000})
	files := section(t, resp.Summary, structured.FilesArtifacts)
	assert.Contains(t, files, "- `cache.go`: created; added `Cache`, `Cache.Get`")
	assert.Equal(t, 1, strings.Count(resp.Summary, "cache.go"), "the earlier file is listed twice")
}

// A choice stated only in the agent's reasoning reaches the decisions,
// labelled as reasoning, and never stands in for the user's request.
func TestReasoningDecisionLabelled(t *testing.T) {
	msgs := []abi.Message{
		user("Can we avoid force pushes when results conflict?"),
		{Role: abi.RoleAssistant, Content: []abi.Block{
			{Type: abi.BlockThinking, Text: "I'll push to a timestamped branch instead of force-pushing, because that never rewrites shared history."},
			{Type: abi.BlockText, Text: "Updating the design."},
		}},
	}
	s := offline(t, msgs, 4000)
	assert.Contains(t, s, "Decided (in its reasoning): I'll push to a timestamped branch instead of force-pushing")
	assert.NotContains(t, s, "No decision stated")
	for _, sec := range digest.ParseSections(s) {
		if digest.TitleKey(sec.Title) == digest.TitleKey(structured.ActiveTask) {
			assert.Contains(t, sec.Body, "avoid force pushes")
			assert.NotContains(t, sec.Body, "timestamped branch", "reasoning is never quoted as the request")
		}
	}
}

// An announcement whose call has run is past: "Let me commit this." with
// the commit made is no next step; one that names more steps still is.
func TestAnnouncedStepThatRanIsNotNext(t *testing.T) {
	session := func(text string) []abi.Message {
		return []abi.Message{
			user("Fix the typo in README.md and commit it."),
			assistant("Fixed.", call("e1", "Edit", args{"file_path": "README.md", "old_string": "teh", "new_string": "the"})),
			result("e1", "ok", false),
			assistant(text, call("c1", "Bash", args{"command": "git commit -am 'README: typo'"})),
			result("c1", "[main 1a2b3c4] README: typo\n 1 file changed", false),
		}
	}
	s := offline(t, session("Let me commit this."), 4000)
	assert.NotContains(t, s, "said it would next: “Let me commit this.”")
	assert.Contains(t, s, "Done as the assistant last announced (its calls ran): “Let me commit this.”")

	s = offline(t, session("Let me commit this, then open the PR."), 4000)
	assert.Contains(t, s, "said it would next: “Let me commit this, then open the PR.”")
}

// A step still to do names the commands the session ran for that kind of
// work, so "Run tests and lint" says how tests and lint run here.
func TestPendingStepNamesItsCommands(t *testing.T) {
	todos := `{"todos":[{"content":"Fix the parser","status":"completed"},{"content":"Run tests and lint","status":"pending"}]}`
	msgs := []abi.Message{
		user("Fix the parser, then make sure tests and lint pass."),
		assistant("", call("t1", "Bash", args{"command": "cd /src && mise run test"})),
		result("t1", "--- FAIL: TestParse", true),
		assistant("", call("t2", "Bash", args{"command": "mise run lint"})),
		result("t2", "ok", false),
		assistant("", call("t3", "Bash", args{"command": "ls /testbed && git checkout -b fix"})),
		result("t3", "", false),
		{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockToolUse, ID: "p1", Name: "TodoWrite", Input: []byte(todos)}}},
		result("p1", "ok", false),
	}
	next := section(t, offline(t, msgs, 4000), structured.NextStep)
	assert.Contains(t, next, "- [pending] Run tests and lint (ran before for this: `mise run test`, `mise run lint`)")
	assert.NotContains(t, next, "checkout")
}

// A long task at a small target leaves room for the rest: the decisions
// and the narrative are not all dropped behind a verbatim 6 KB request,
// and the summary stays under the host's limit of twice the target.
func TestLongRequestLeavesRoomAtSmallTarget(t *testing.T) {
	msgs := []abi.Message{
		user(longRequest(80)), // about 6 KB
		assistant("I'll keep the old flag rather than rename it, so it must be opt-in for existing users.",
			call("b1", "Bash", args{"command": "go test ./..."})),
		result("b1", "ok  \tgithub.com/acme/app\t0.2s", false),
		assistant("Done: the flag is opt-in."),
	}
	const target = 1200
	s := offline(t, msgs, target)
	assert.Contains(t, section(t, s, structured.KeyDecisions), "I'll keep the old flag rather than rename it")
	assert.Contains(t, s, "step 001:", "the request's head is kept")
	assert.LessOrEqual(t, digest.EstimateTokens(s), target*9/5)
}

// Short of room, a changed file keeps its path and gives up the detail of
// its change, a script the shell wrote before a file edited twice, and a
// long request is cut to its head and tail before the decisions go.
func TestShortOfRoomDetailGoesBeforeItems(t *testing.T) {
	msgs := []abi.Message{user(longRequest(80))}
	for i := 0; i < 12; i++ {
		id := fmt.Sprintf("s%d", i)
		msgs = append(msgs,
			assistant("Writing a script.", call(id, "bash", args{"command": fmt.Sprintf("cat > try_%d.py << 'EOF'\nimport handler\nprint(handler.run(%d))\nEOF", i, i)})),
			result(id, "", false))
	}
	for i, nw := range []string{"func Run() { check() }", "func Run() { check(); log() }"} {
		id := fmt.Sprintf("e%d", i)
		msgs = append(msgs,
			assistant("Editing the handler.", call(id, "Edit", args{"file_path": "handler.go", "old_string": "func Run() {}", "new_string": nw})),
			result(id, "ok", false))
	}
	msgs = append(msgs, assistant("We decided to keep the old handler signature because callers depend on it."))
	s := offline(t, msgs, 400)
	files := section(t, s, structured.FilesArtifacts)
	for i := 0; i < 12; i++ {
		assert.Contains(t, files, fmt.Sprintf("`try_%d.py`", i))
	}
	assert.Contains(t, files, "- `try_0.py`\n", "a script's detail is the first to go, the oldest first")
	assert.Contains(t, files, "`handler.go`: 2 edits; changed `Run`; last:")
	assert.Contains(t, section(t, s, structured.KeyDecisions), "keep the old handler signature")
	task := section(t, s, structured.ActiveTask)
	assert.Contains(t, task, "step 001")
	assert.Contains(t, task, "left out here")
}

// A failed script the agent replaced with another that ran is not the
// next step: it went another way. A failed script with no later run of
// the program stays open.
func TestReplacedScriptIsNotOpen(t *testing.T) {
	msgs := []abi.Message{
		user("fix the migration order"),
		assistant("", call("1", "bash", args{"command": "cd /testbed && python test_fix.py"})),
		result("1", "Traceback (most recent call last):\nKeyError: 'indexes'\n", true),
		assistant("", call("2", "bash", args{"command": "cd /testbed && python test_fix2.py"})),
		result("2", "Order: AlterOrderWithRespectTo, AddIndex\n", false),
		assistant("", call("3", "bash", args{"command": "cd /testbed && node check.js"})),
		result("3", "Error: cannot find module 'x'\n", true),
		assistant("Looking at the output."),
	}
	s := offline(t, msgs, 4000)
	next := section(t, s, structured.NextStep)
	assert.NotContains(t, next, "test_fix.py")
	assert.Contains(t, next, "check.js")
	assert.Contains(t, section(t, s, structured.PendingItems), "went another way: `bash cd /testbed && python test_fix2.py` ran after it")
}

// An error already fixed is history: when room runs short it goes before
// an error nothing has fixed yet, never after it.
func TestFixedErrorsGiveWayFirst(t *testing.T) {
	msgs := []abi.Message{
		user("Make the config tests pass."),
		assistant("", call("t1", "Bash", args{"command": "go test ./internal/config/..."})),
		result("t1", "--- FAIL: TestLoadMissing (0.00s)\nFAIL\nexit status 1", false),
		assistant("", call("e1", "Edit", args{"file_path": "internal/config/load.go", "old_string": "return nil", "new_string": "return ErrMissing"})),
		result("e1", "ok", false),
		assistant("", call("t2", "Bash", args{"command": "go test ./internal/config/..."})),
		result("t2", "ok  \tacme/internal/config\t0.01s", false),
		assistant("", call("r1", "Read", args{"file_path": "internal/config/schema.json"})),
		result("r1", "File does not exist.", true),
		assistant("The loader now returns ErrMissing; the schema file is still missing."),
	}
	const fixed, open = "passed later", "schema.json` failed with"
	sawOpenAlone := false
	for target := 120; target <= 1200; target += 20 {
		p := section(t, offline(t, msgs, target), structured.PendingItems)
		if strings.Contains(p, fixed) {
			require.Contains(t, p, open, "at %d tokens the fixed error is kept and the open one left out:\n%s", target, p)
		}
		sawOpenAlone = sawOpenAlone || strings.Contains(p, open) && !strings.Contains(p, fixed)
	}
	assert.True(t, sawOpenAlone, "no target keeps the open error without the fixed one")
	whole := section(t, offline(t, msgs, 4000), structured.PendingItems)
	assert.Contains(t, whole, fixed)
	assert.Contains(t, whole, open)
}
