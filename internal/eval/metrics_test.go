package eval

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestArtifactRecall(t *testing.T) {
	ops := abi.FileOps{Read: []string{"/src/a.go", "/src/b.go", "/src/c.go"}, Modified: []string{"/src/m.go", "/src/n.go"}}
	text := "We read /src/a.go and /src/c.go.\nThen edited /src/m.go."
	r := ArtifactRecall(ops, text)
	equal(t, r, Recall{Modified: 2, ModifiedNamed: 1, ModifiedByName: 1, Read: 3, ReadNamed: 2, ReadByName: 2,
		MissingModified: []string{"/src/n.go"}, MissingRead: []string{"/src/b.go"}})
	near(t, r.ModifiedShare(), 0.5)
	near(t, r.ReadShare(), 2.0/3)

	// A path must occur as written: a shorter path it contains is not it.
	r = ArtifactRecall(abi.FileOps{Modified: []string{"/src/parser_test.go"}}, "edited /src/parser.go")
	equal(t, r.ModifiedNamed, 0)

	// By name, a file named relative to the project counts; by path not.
	r = ArtifactRecall(abi.FileOps{Modified: []string{"/home/u/app/pkg/a.go"}, Read: []string{"/home/u/app/b.go", `C:\app\c.go`}},
		"Changed pkg/a.go after reading c.go.")
	equal(t, []int{r.ModifiedNamed, r.ModifiedByName, r.ReadNamed, r.ReadByName}, []int{0, 1, 0, 1})

	// Nothing to recall counts as full recall.
	near(t, ArtifactRecall(abi.FileOps{}, "").ModifiedShare(), 1)
}

func TestRecallPools(t *testing.T) {
	var p Recall
	p.add(Recall{Modified: 2, ModifiedNamed: 2, ModifiedByName: 2, Read: 4, ReadNamed: 3, ReadByName: 4, MissingRead: []string{"x"}})
	p.add(Recall{Modified: 1, ModifiedNamed: 0, Read: 0, MissingModified: []string{"y"}})
	equal(t, p, Recall{Modified: 3, ModifiedNamed: 2, ModifiedByName: 2, Read: 4, ReadNamed: 3, ReadByName: 4, MissingModified: []string{"y"}, MissingRead: []string{"x"}})
}

func TestContextTextCoversEveryBlock(t *testing.T) {
	msgs := []abi.Message{
		{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "fix it"}}},
		{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockToolUse, ID: "t1", Name: "Edit", Input: json.RawMessage(`{"file_path":"/x/y.go"}`)}}},
		{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: "t1", Text: "wrote /x/z.go"}}},
	}
	text := ContextText(msgs)
	for _, want := range []string{"fix it", "Edit", "/x/y.go", "/x/z.go"} {
		if !strings.Contains(text, want) {
			t.Errorf("context text lacks %q:\n%s", want, text)
		}
	}
}

func TestLatestRequest(t *testing.T) {
	msgs := []abi.Message{
		userText("first request"),
		userText("  second request \n"),
		assistantCall("t1", "Read", `{"file_path":"a.go"}`),
		toolResults(result("t1", "contents")),
		{Role: abi.RoleUser, Summary: true, Content: []abi.Block{{Type: abi.BlockText, Text: "a summary is not a request"}}},
		{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "   "}}},
	}
	req, ok := LatestRequest(msgs)
	if !ok || req != "second request" {
		t.Errorf("LatestRequest = %q, %v; want the second request", req, ok)
	}
	if req, ok := LatestRequest(msgs[2:4]); ok {
		t.Errorf("tool results alone are not a request, got %q", req)
	}
}

func TestRetained(t *testing.T) {
	req := "Please fix   the failing\n\ttest in parser_test.go"
	long := strings.Repeat("word ", 39) + "abcdé" + strings.Repeat("x", 500) // the é is bytes 199 and 200
	for _, c := range []struct {
		request, text string
		want          bool
	}{
		{req, "## Task\nPlease fix the failing test in parser_test.go and more", true},
		{req, "Please fix the\nfailing test in   parser_test.go", true}, // folded on both sides
		{req, "Please fix the failing test", false},                     // a short request is needed whole
		{req, "fix the failing test in parser_test.go", false},
		{long, foldSpace(long)[:retentionPrefix-1], true}, // the opening words, cut before the é, suffice
		{long, foldSpace(long)[:retentionPrefix-10], false},
	} {
		if got := Retained(c.request, c.text); got != c.want {
			t.Errorf("Retained(%.40q, %.40q) = %v, want %v", c.request, c.text, got, c.want)
		}
	}
}

func TestValidCatchesOrphans(t *testing.T) {
	call := assistantCall("t1", "Bash", `{"command":"ls"}`)
	if err := Valid(withIDs(userText("go"), call, toolResults(result("t1", "a.go")))); err != nil {
		t.Fatalf("a call and its result: %v", err)
	}
	for name, c := range map[string]struct {
		msgs []abi.Message
		want string
	}{
		"result without its call": {[]abi.Message{userText("go"), {Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockText, Text: "thinking"}}},
			toolResults(result("t1", "a.go"))}, "has no tool_use"},
		"call without its result": {[]abi.Message{userText("go"), call}, "has no tool_result"},
		// A summary in place of the call, the result kept: what a cut
		// between the two would leave.
		"cut between call and result": {[]abi.Message{{Role: abi.RoleUser, Summary: true, Content: []abi.Block{{Type: abi.BlockText, Text: "summary"}}},
			toolResults(result("t1", "a.go"))}, "has no tool_use"},
	} {
		err := Valid(withIDs(c.msgs...))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Valid = %v, want an error saying %q", name, err, c.want)
		}
	}
}

func TestAbsError(t *testing.T) {
	var e AbsError
	e.add(1, 110, 100) // 10%
	e.add(2, 80, 100)  // 20%
	e.add(3, 100, 100) // 0%
	e.add(4, 95, 100)  // 5%
	e.add(5, 115, 100) // 15%
	equal(t, e.N, 5)
	near(t, e.All, 10)
	equal(t, e.NAfter, 2)
	near(t, e.AfterThree, 10)
}

func TestUsageTranslation(t *testing.T) {
	tr := usageTranslation{overhead: 1000, calls: map[int]agentCall{7: {recorded: 11000, estimate: 8000, hidden: 1000}}}
	recorded := &abi.Usage{InputTokens: 1000, CacheReadTokens: 10000, OutputTokens: 50}
	// The messages cost 10,000 tokens for an estimate of 8,000; the
	// replay sent half the estimate, so the provider would count 5,000.
	u := tr.usageFor(7, 4000, recorded)
	require.NotNil(t, u)
	assert.Equal(t, 5000, u.PromptTokens())
	assert.Equal(t, 50, u.OutputTokens)
	assert.Nil(t, tr.usageFor(8, 4000, recorded), "no report for that message")
	tr.calls[9] = agentCall{recorded: 900, estimate: 100, hidden: 1000}
	assert.Nil(t, tr.usageFor(9, 100, recorded), "a report below the hidden part says nothing about the messages")
}

func TestHiddenTracker(t *testing.T) {
	var h hiddenTracker
	// Before any compaction: the first gap, and the ratio the reports show.
	assert.Equal(t, 1000, h.observe(13000, 10000, 1000))
	assert.Equal(t, 1000, h.observe(25000, 20000, 1000))
	// After the agent compacts, what grows beyond the messages at that
	// ratio (1.2) is hidden.
	h.agentCompacted()
	assert.Equal(t, 16400, h.observe(17600, 1000, 1000))
	assert.Equal(t, 16400, h.observe(18800, 2000, 1000))
	// Never below the first gap.
	assert.Equal(t, 1000, h.observe(1500, 2000, 1000))
}

// Helpers building canonical messages.

// withIDs numbers the messages, as sessions do.
func withIDs(msgs ...abi.Message) []abi.Message {
	for i := range msgs {
		msgs[i].ID = fmt.Sprintf("m%d", i)
	}
	return msgs
}

func userText(text string) abi.Message {
	return abi.Message{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: text}}}
}

func assistantCall(id, tool, input string) abi.Message {
	return abi.Message{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockToolUse, ID: id, Name: tool, Input: json.RawMessage(input)}}}
}

func result(id, text string) abi.Block {
	return abi.Block{Type: abi.BlockToolResult, ToolUseID: id, Text: text}
}

func toolResults(blocks ...abi.Block) abi.Message {
	return abi.Message{Role: abi.RoleUser, Content: blocks}
}

func equal[T any](t *testing.T, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func near(t *testing.T, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("got %v, want %v", got, want)
	}
}
