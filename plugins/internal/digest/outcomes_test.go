package digest_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/plugins/internal/digest"
	"github.com/compact-host/compact-host/plugins/pluginstest"
)

type args = pluginstest.Args

// What commands returned is kept, the last run of each command only:
// a failed test run fixed later is not reported as the latest result.
func TestOutcomes(t *testing.T) {
	call, result, assistant := pluginstest.Call, pluginstest.Result, pluginstest.Assistant
	noise := strings.Repeat("building module\n", 2000) // longer than what is read of an output's middle
	msgs := []abi.Message{
		pluginstest.User("fix the dtype bug"),
		assistant("", call("1", "Bash", args{"command": "go test ./internal/cast/"})),
		result("1", "--- FAIL: TestCast\nFAIL\tcast\t0.2s\n", true),
		assistant("", call("2", "Bash", args{"command": "python reproduce.py"})),
		result("2", "Checking dtypes\nSUCCESS: Dtypes preserved\n", false),
		assistant("", call("3", "Bash", args{"command": "cd /src && go test ./internal/cast/ 2>&1 | tail"})),
		result("3", "ok  \tcast\t0.3s\n", false),
		assistant("", call("4", "Bash", args{"command": "git diff"})),
		result("4", "+ tests: 3 passed\n", false),
		assistant("", call("5", "Bash", args{"command": "grep -rn fail ."})),
		result("5", "a.go:3: 2 failed\n", false),
		assistant("", call("6", "exec_command", args{"cmd": "bun test"})),
		result("6", "Chunk ID: 1f2e\nProcess running with session ID 4242\nRESULT: ERROR (run aborted)\n"+noise, false),
		assistant("", call("7", "write_stdin", map[string]any{"session_id": 4242, "chars": ""})),
		result("7", noise+" 15 pass\n 0 fail\nRan 15 tests across 2 files.\n", false),
		assistant("", call("8", "Bash", args{"command": "python -m pytest tests/"})),
		result("8", "/usr/bin/python: No module named pytest\n", false),
	}
	got := map[string][]string{}
	for _, o := range digest.Outcomes(digest.Calls(msgs)) {
		got[o.Call] = o.Lines
	}
	assert.Equal(t, map[string][]string{
		"Bash python reproduce.py":                             {"SUCCESS: Dtypes preserved"},
		"Bash cd /src && go test ./internal/cast/ 2>&1 | tail": {"ok  \tcast\t0.3s"},
		"exec_command bun test":                                {"Ran 15 tests across 2 files.", "15 pass", "0 fail"},
		"Bash python -m pytest tests/":                         {"/usr/bin/python: No module named pytest"},
	}, got)
}
