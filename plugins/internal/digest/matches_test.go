package digest_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/plugins/internal/digest"
	"github.com/compact-host/compact-host/plugins/pluginstest"
)

// A value a search found is kept: the lines that define or assign what
// was searched for, whichever agent's search tool found them; uses,
// comparisons and calls of the name are not.
func TestMatches(t *testing.T) {
	call, result, assistant := pluginstest.Call, pluginstest.Result, pluginstest.Assistant
	msgs := []abi.Message{
		pluginstest.User("why is the output cut?"),
		assistant("", call("1", "search_files", args{"path": "src", "regex": "MAX_OUTPUT_LENGTH", "file_pattern": "*.ts"})),
		result("1", "Found 2 results.\n\n# src/index.ts\n 28 | \n 29 | const MAX_OUTPUT_LENGTH = 100000; // raised\n 30 | const CACHE = '.skeletons';\n----\n504 |  if (item.text.length > MAX_OUTPUT_LENGTH) {\n----\n", false),
		assistant("", call("2", "search_files", args{"path": "src", "regex": "handleViewTree"})),
		result("2", "410 |   result = this.handleViewTree(args);\n----\n769 |   handleViewTree(args: { max_output_length?: number }): Result {\n770 |     const { max_output_length = 50000 } = args;\n771 |     const out = [];\n", false),
		assistant("", call("3", "Grep", args{"pattern": "\\bretries\\b", "path": "config"})),
		result("3", "config/app.yaml:12:  retries: 5\nconfig/app.yaml:30:  # retries are logged\n", false),
		assistant("", call("4", "Bash", args{"command": "cd /src && grep -rn 'def parse_date' lib/ | head"})),
		result("4", "lib/dates.py:40:def parse_date(text, tz=None):\nlib/dates.py:41:    tz = tz or UTC\nlib/use.py:3:    d = parse_date(s)\n", false),
		assistant("", call("5", "Bash", args{"command": "grep -n timeout main.go"})),
		result("5", "grep: main.go: No such file or directory", true),
		// Bounds: the names past the eighth of a pattern, and what lies
		// past the head of a long output, are not read.
		assistant("", call("7", "grep_search", args{"query": "aaa|bbb|ccc|ddd|eee|fff|ggg|hhh|zzz_limit"})),
		result("7", "zzz_limit = 9\n", false),
		assistant("", call("8", "Grep", args{"pattern": "BUFFER_SIZE"})),
		result("8", strings.Repeat("x.go:1: use(BUFFER_SIZE)\n", 1000)+"x.go:9: BUFFER_SIZE = 64\n", false),
		assistant("", call("6", "Bash", args{"command": "go test ./..."})),
		result("6", "ok  \tapp\t0.2s\nTIMEOUT = 3\n", false),
	}
	got := map[string][]string{}
	for _, m := range digest.Matches(digest.Calls(msgs)) {
		got[m.Call] = m.Lines
	}
	assert.Equal(t, map[string][]string{
		"search_files MAX_OUTPUT_LENGTH": {"const MAX_OUTPUT_LENGTH = 100000; // raised"},
		"search_files handleViewTree":    {"handleViewTree(args: { max_output_length?: number }): Result {", "const { max_output_length = 50000 } = args;"},
		`Grep \bretries\b`:               {"retries: 5"},
		"grep def parse_date":            {"def parse_date(text, tz=None):", "tz = tz or UTC"},
	}, got)
}
