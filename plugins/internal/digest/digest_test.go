package digest_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/plugins/internal/digest"
	"github.com/compact-host/compact-host/plugins/pluginstest"
)

func call(name string, input string) abi.Message {
	return abi.Message{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockToolUse, ID: name, Name: name, Input: json.RawMessage(input)}}}
}

func TestFileOps(t *testing.T) {
	cases := []struct {
		name     string
		msg      abi.Message
		modified []string
		read     []string
	}{
		{"edit", call("Edit", `{"file_path":"a.go","old_string":"x","new_string":"y"}`), []string{"a.go"}, nil},
		{"read", call("Read", `{"file_path":"a.go"}`), nil, []string{"a.go"}},
		{"copilot create", call("create", `{"path":"docs/plan.md","file_text":"x"}`), []string{"docs/plan.md"}, nil},
		{"editor view", call("str_replace_editor", `{"command":"view","path":"b.py"}`), nil, []string{"b.py"}},
		{"editor replace", call("str_replace_editor", `{"command":"str_replace","path":"b.py"}`), []string{"b.py"}, nil},
		{"codex patch", call("apply_patch", `"*** Begin Patch\n*** Update File: src/x.ts\n@@\n-a\n+b\n*** Add File: src/y.ts\n+c\n*** End Patch"`), []string{"src/x.ts", "src/y.ts"}, nil},
		{"patch in shell", call("exec_command", `{"cmd":"apply_patch <<'EOF'\n*** Begin Patch\n*** Delete File: old.go\n*** End Patch\nEOF"}`), []string{"old.go"}, nil},
		{"redirect", call("Bash", `{"command":"go test ./... > test.log 2>&1 && echo \"a > b\""}`), []string{"test.log"}, nil},
		{"heredoc body ignored", call("bash", `{"command":"cat > fix.py <<'EOF'\nx = 1 > 0\nopen('z.txt','w')\nEOF\npython fix.py"}`), []string{"fix.py"}, nil},
		{"sed -i", call("Bash", `{"command":"sed -i 's/a/b/' pkg/x.go pkg/y.go"}`), []string{"pkg/x.go", "pkg/y.go"}, nil},
		{"sed -n reads", call("Bash", `{"command":"sed -n '1,20p' pkg/x.go"}`), nil, []string{"pkg/x.go"}},
		{"codex shell_command head", call("shell_command", `{"command":"head -n 50 src/app.ts && cat README.md | wc -l","workdir":"/repo"}`), nil, []string{"src/app.ts", "README.md"}},
		{"codex exec_command cat", call("exec_command", `{"cmd":"cat .agents/workflow.md","workdir":"/repo"}`), nil, []string{".agents/workflow.md"}},
		{"rm", call("Bash", `{"command":"rm -f old/x.go"}`), []string{"old/x.go"}, nil},
		{"tee and devnull", call("Bash", `{"command":"make 2>/dev/null | tee -a build.log"}`), []string{"build.log"}, nil},
		{"grep is not a file op", call("Grep", `{"pattern":"x","path":"internal"}`), nil, nil},
		{"bad input", call("Edit", `{"file_path":`), nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ops := digest.FileOps([]abi.Message{tc.msg}, abi.FileOps{})
			if !reflect.DeepEqual(ops.Modified, tc.modified) || !reflect.DeepEqual(ops.Read, tc.read) {
				t.Errorf("modified %q read %q, want %q %q", ops.Modified, ops.Read, tc.modified, tc.read)
			}
		})
	}
}

func TestFileOpsReadThenModified(t *testing.T) {
	msgs := []abi.Message{call("Read", `{"file_path":"a.go"}`), call("Read", `{"file_path":"b.go"}`), call("Edit", `{"file_path":"a.go"}`)}
	ops := digest.FileOps(msgs, abi.FileOps{Modified: []string{"host.go"}, Read: []string{"b.go"}})
	if !reflect.DeepEqual(ops.Modified, []string{"host.go", "a.go"}) || !reflect.DeepEqual(ops.Read, []string{"b.go"}) {
		t.Errorf("got %+v", ops)
	}
}

func TestRequests(t *testing.T) {
	text := func(role, s string) abi.Message {
		return abi.Message{Role: role, Content: []abi.Block{{Type: abi.BlockText, Text: s}}}
	}
	msgs := []abi.Message{
		text(abi.RoleUser, "<environment_context>\n  <cwd>/x</cwd>\n</environment_context>"),
		text(abi.RoleUser, "<current_datetime>2026-06-24</current_datetime>\nfix the build<system-reminder>be brief</system-reminder>"),
		text(abi.RoleAssistant, "running ls"),
		text(abi.RoleUser, "file.txt\n(Open file: n/a)\n(Current directory: /repo)"), // SWE-agent observation
		pluginstest.Result("t", "tool output", false),
		{Role: abi.RoleUser, Summary: true, Content: []abi.Block{{Type: abi.BlockText, Text: "summary"}}},
		text(abi.RoleUser, "This session is being continued from a previous conversation that ran out of context."),
		text(abi.RoleUser, "[Request interrupted by user]"),
	}
	reqs := digest.Requests(msgs)
	if len(reqs) != 1 || reqs[0].Index != 1 || reqs[0].Text != "fix the build" {
		t.Fatalf("requests %+v, want only the cleaned %q", reqs, "fix the build")
	}
	if r, ok := digest.LatestRequest(msgs); !ok || r.Index != 1 {
		t.Errorf("latest %+v %v", r, ok)
	}
}

func TestErrors(t *testing.T) {
	msgs := pluginstest.TurnPrefix()
	msgs = append(msgs,
		pluginstest.Assistant("", pluginstest.Call("r", "Read", pluginstest.Args{"file_path": "x.go"})),
		pluginstest.Result("r", "if err != nil {\n\treturn fmt.Errorf(\"error: %w\", err)\n}", false),
		pluginstest.Assistant("", pluginstest.Call("py", "Bash", pluginstest.Args{"command": "python t.py"})),
		pluginstest.Result("py", "Traceback (most recent call last):\n  File \"t.py\", line 1\n    x()\nNameError: name 'x' is not defined\n", false),
	)
	errs := digest.Errors(msgs)
	if len(errs) != 2 {
		t.Fatalf("%d errors, want the failed build and the traceback: %+v", len(errs), errs)
	}
	if !strings.Contains(errs[0].Text, "render.go:7:2: package acme/app/util is not in std") {
		t.Errorf("build error %q", errs[0].Text)
	}
	if errs[1].Text != "NameError: name 'x' is not defined" || errs[1].Call != "Bash python t.py" {
		t.Errorf("traceback reduced to %+v", errs[1])
	}
}

func TestRenderRespectsLimit(t *testing.T) {
	msgs := pluginstest.Session()
	for i := 0; i < 200; i++ {
		msgs = append(msgs, pluginstest.User(strings.Repeat("word ", 400)))
	}
	full := digest.Render(msgs, 0)
	for _, limit := range []int{100_000, 20_000, 3_000} {
		s := digest.Render(msgs, limit)
		if len(s) > limit {
			t.Errorf("limit %d: rendered %d bytes", limit, len(s))
		}
		if !strings.HasPrefix(s, "[user]\nThe CLI crashes") {
			t.Errorf("limit %d: first message lost", limit)
		}
	}
	if !strings.Contains(full, "[Bash error]\n--- FAIL: TestLoadMissing") || !strings.Contains(full, "[assistant calls Edit]") {
		t.Errorf("transcript does not label calls and errors:\n%.2000s", full)
	}
}

func TestClipKeepsUTF8(t *testing.T) {
	s := strings.Repeat("日本語", 100)
	for n := 0; n < 40; n++ {
		c := digest.Clip(s, n)
		if len(c) > n || !utf8.ValidString(c) || !strings.HasPrefix(s, strings.Split(c, " […] ")[0]) {
			t.Errorf("Clip(%d) = %q", n, c)
		}
	}
}

func TestErrorsLeaveOutCallsNotRun(t *testing.T) {
	msgs := []abi.Message{
		pluginstest.User("Find the handler."),
		pluginstest.Assistant("", pluginstest.Call("g", "Grep", pluginstest.Args{"pattern": "func Handle"}), pluginstest.Call("r", "Read", pluginstest.Args{"file_path": "h.go"})),
		pluginstest.Result("g", "ENOENT: no such file or directory, posix_spawn 'rg'", true),
		pluginstest.Result("r", "<tool_use_error>Sibling tool call errored</tool_use_error>", true),
	}
	errs := digest.Errors(msgs)
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Call, "Grep") {
		t.Fatalf("errors %+v, want only the Grep that failed, not the Read it kept from running", errs)
	}
	// A result that says more than that is an error of its own.
	msgs[3] = pluginstest.Result("r", "<tool_use_error>Sibling tool call errored</tool_use_error>\n"+strings.Repeat("h.go: permission denied\n", 8), true)
	if errs := digest.Errors(msgs); len(errs) != 2 {
		t.Fatalf("errors %+v, want both", errs)
	}
}
