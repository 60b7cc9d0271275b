package formats

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
)

func TestValidateAccepts(t *testing.T) {
	msgs := []abi.Message{
		msg("s", abi.RoleSystem, text("rules")),
		msg("u", abi.RoleUser, text("go")),
		msg("a1", abi.RoleAssistant, text("two calls"), toolUse("c1", "ls", `{}`), toolUse("c2", "cat", `{}`)),
		// Parallel results may be split over user messages, in any order.
		msg("r1", abi.RoleUser, toolResult("c2", "x")),
		msg("r2", abi.RoleUser, toolResult("c1", "y"), text("and a note")),
		msg("a2", abi.RoleAssistant, text("done")),
		msg("a3", abi.RoleAssistant, text("consecutive assistants without calls are fine")),
	}
	assert.NoError(t, Validate(msgs))
	assert.NoError(t, Validate(nil))
}

func TestValidateRejects(t *testing.T) {
	call := msg("a", abi.RoleAssistant, toolUse("c1", "ls", `{}`))
	result := msg("r", abi.RoleUser, toolResult("c1", "ok"))
	cases := []struct {
		name  string
		msgs  []abi.Message
		index int
		why   string
	}{
		{"bad role", []abi.Message{msg("x", "tool", text("a"))}, 0, `unknown role "tool"`},
		{"empty ID", []abi.Message{msg("", abi.RoleUser, text("a"))}, 0, "empty ID"},
		{"duplicate ID", []abi.Message{msg("x", abi.RoleUser, text("a")), msg("x", abi.RoleUser, text("b"))}, 1, "duplicate ID"},
		{"no content", []abi.Message{msg("x", abi.RoleUser)}, 0, "no content"},
		{"unknown block", []abi.Message{msg("x", abi.RoleUser, abi.Block{Type: "audio"})}, 0, `unknown block type "audio"`},
		{"call without result", []abi.Message{call}, 0, "tool_use c1 has no tool_result"},
		{"call answered after another assistant", []abi.Message{call, msg("a2", abi.RoleAssistant, text("hm")), result}, 0, "no tool_result before the next assistant message"},
		{"text before the results", []abi.Message{call, msg("u", abi.RoleUser, text("wait")), result}, 1, "does not start with their results"},
		{"result after text", []abi.Message{call, msg("r", abi.RoleUser, toolResult("c1", "ok"), text("x"), toolResult("c1", "again"))}, 1, "after other content"},
		{"orphan result", []abi.Message{msg("r", abi.RoleUser, toolResult("zz", "ok"))}, 0, "tool_result zz has no tool_use"},
		{"duplicate result", []abi.Message{call, result, msg("r2", abi.RoleUser, toolResult("c1", "again"))}, 2, "duplicate or comes too late"},
		{"tool_use in user", []abi.Message{msg("u", abi.RoleUser, toolUse("c1", "ls", `{}`))}, 0, "tool_use in a user message"},
		{"tool_result in assistant", []abi.Message{msg("a", abi.RoleAssistant, toolResult("c1", "x"))}, 0, "tool_result in a assistant message"},
		{"call without name", []abi.Message{msg("a", abi.RoleAssistant, toolUse("c1", "", `{}`))}, 0, "without ID or name"},
		{"duplicate call ID", []abi.Message{call, result, msg("a2", abi.RoleAssistant, toolUse("c1", "ls", `{}`)), msg("r2", abi.RoleUser, toolResult("c1", "ok"))}, 2, "duplicate tool_use ID c1"},
		{"system between call and result", []abi.Message{call, msg("s", abi.RoleSystem, text("x")), result}, 0, "before the next system message"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ve *ValidationError
			require.ErrorAs(t, Validate(c.msgs), &ve)
			assert.Equal(t, c.index, ve.Index)
			assert.Contains(t, ve.Reason, c.why)
		})
	}
}

func TestNormalizeKeepsValidInput(t *testing.T) {
	msgs := []abi.Message{
		msg("u", abi.RoleUser, text("go")),
		msg("a", abi.RoleAssistant, toolUse("c1", "ls", `{}`), toolUse("c2", "ls", `{}`)),
		msg("r", abi.RoleUser, toolResult("c2", "2"), toolResult("c1", "1")),
	}
	want := append([]abi.Message(nil), msgs...)
	rep := map[string]int{}
	got, marks := normalize(msgs, []int{1, 3}, "x", rep)
	assert.Equal(t, want, got, "valid input changed")
	assert.Equal(t, []int{1, 3}, marks)
	assert.Empty(t, rep)
}

func TestNormalizeRepairs(t *testing.T) {
	cases := []struct {
		name     string
		in       []abi.Message
		marks    []int
		want     []string
		wantMark []int
		repaired map[string]int
	}{
		{
			name: "interrupted call at the end",
			in:   []abi.Message{msg("a", abi.RoleAssistant, toolUse("c1", "ls", `{}`))},
			want: []string{
				`assistant a: tool_use(c1 ls {})`,
				`user a-results: tool_result(c1 error ` + missing + `)`,
			},
			repaired: map[string]int{RepairMissingResult: 1},
		},
		{
			name: "interrupted call followed by the user: results go first in that message",
			in: []abi.Message{
				msg("a", abi.RoleAssistant, toolUse("c1", "ls", `{}`)),
				msg("u", abi.RoleUser, text("stop")),
			},
			want: []string{
				`assistant a: tool_use(c1 ls {})`,
				`user u: tool_result(c1 error ` + missing + `) text("stop")`,
			},
			repaired: map[string]int{RepairMissingResult: 1},
		},
		{
			name: "no result moves across a mark",
			in: []abi.Message{
				msg("a", abi.RoleAssistant, toolUse("c1", "ls", `{}`)),
				msg("u", abi.RoleUser, text("after the compaction")),
			},
			marks: []int{1},
			want: []string{
				`assistant a: tool_use(c1 ls {})`,
				`user a-results: tool_result(c1 error ` + missing + `)`,
				`user u: text("after the compaction")`,
			},
			wantMark: []int{2},
			repaired: map[string]int{RepairMissingResult: 1},
		},
		{
			name: "results scattered and late are gathered",
			in: []abi.Message{
				msg("a1", abi.RoleAssistant, toolUse("c1", "ls", `{}`), toolUse("c2", "ls", `{}`)),
				msg("u1", abi.RoleUser, text("note"), toolResult("c2", "two")),
				msg("a2", abi.RoleAssistant, text("still waiting")),
				msg("u2", abi.RoleUser, toolResult("c1", "one")),
			},
			marks: []int{3, 4},
			want: []string{
				`assistant a1: tool_use(c1 ls {}) tool_use(c2 ls {})`,
				`user u1: tool_result(c1 "one") tool_result(c2 "two") text("note")`,
				`assistant a2: text("still waiting")`,
			},
			wantMark: []int{3, 3},
			repaired: map[string]int{},
		},
		{
			name: "orphan and duplicate results become text",
			in: []abi.Message{
				msg("u0", abi.RoleUser, toolResult("ghost", "boo")),
				msg("a", abi.RoleAssistant, toolUse("c1", "ls", `{}`)),
				msg("r", abi.RoleUser, toolResult("c1", "ok"), toolResult("c1", "again")),
			},
			want: []string{
				`user u0: text("[tool result for ghost] boo")`,
				`assistant a: tool_use(c1 ls {})`,
				`user r: tool_result(c1 "ok") text("[tool result for c1] again")`,
			},
			repaired: map[string]int{RepairOrphanResult: 2},
		},
		{
			name: "reused call IDs pair in order",
			in: []abi.Message{
				msg("a1", abi.RoleAssistant, toolUse("c", "ls", `{}`)),
				msg("r1", abi.RoleUser, toolResult("c", "first")),
				msg("a2", abi.RoleAssistant, toolUse("c", "ls", `{}`), toolUse("", "", `{}`)),
				msg("r2", abi.RoleUser, toolResult("c", "second")),
			},
			want: []string{
				`assistant a1: tool_use(c ls {})`,
				`user r1: tool_result(c "first")`,
				`assistant a2: tool_use(c~2 ls {}) tool_use(a2-call unknown {})`,
				`user r2: tool_result(c~2 "second") tool_result(a2-call error ` + missing + `)`,
			},
			repaired: map[string]int{RepairDuplicateCallID: 2, RepairMissingResult: 1},
		},
		{
			name: "misplaced blocks, empty messages and duplicate IDs",
			in: []abi.Message{
				msg("x", abi.RoleUser, toolUse("c9", "ls", `{"a":1}`)),
				msg("x", abi.RoleAssistant, toolResult("c9", "r")),
				msg("e", abi.RoleAssistant),
				msg("", abi.RoleUser, text("hi")),
			},
			marks: []int{2},
			want: []string{
				`user x: text("[tool call ls c9] {\"a\":1}")`,
				`assistant x~2: text("[tool result for c9] r")`,
				`user x-3: text("hi")`,
			},
			wantMark: []int{2},
			repaired: map[string]int{RepairMisplacedBlock: 2, RepairDuplicateMessageID: 2},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := map[string]int{}
			got, marks := normalize(c.in, c.marks, "x", rep)
			diffLines(t, describeAll(got), c.want)
			assert.NoError(t, Validate(got))
			if c.wantMark != nil {
				assert.Equal(t, c.wantMark, marks)
			}
			assert.Equal(t, c.repaired, rep)
		})
	}
}
