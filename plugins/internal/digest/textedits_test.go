package digest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/plugins/internal/digest"
	"github.com/compact-host/compact-host/plugins/pluginstest"
)

// An edit asked for in the text (Aider's SEARCH/REPLACE blocks) and one
// made with another agent's spelling of an edit tool's input (opencode's
// camelCase) read as the edits they are: the files are modified and what
// changed in them is named. A block with no path before it, or one never
// closed, changes nothing.
func TestEditsOtherAgentsWrite(t *testing.T) {
	aider := "I will add the async version.\n\n```typescript\nsrc/union.ts\n<<<<<<< SEARCH\nexport function union() {}\n=======\nexport function union() {}\n\nexport async function unionAsync() {}\n>>>>>>> REPLACE\n```\n\n" +
		"Then the index:\n\nsrc/index.ts\n```ts\n<<<<<<< SEARCH\nexport * from './a.ts';\n=======\nexport * from './a.ts';\nexport * from './union.ts';\n>>>>>>> REPLACE\n```\n\n" +
		"An example, not an edit:\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n\nnotes.md\n<<<<<<< SEARCH\nnever closed\n"
	msgs := []abi.Message{
		pluginstest.User("write the async union"),
		pluginstest.Assistant(aider),
		pluginstest.Assistant("", pluginstest.Call("e1", "edit", pluginstest.Args{"filePath": "/site/footer.tsx", "oldString": "<Footer />", "newString": "<Footer><ShieldedButton /></Footer>"})),
		pluginstest.Result("e1", "Edit applied successfully.", false),
	}
	f := digest.Gather(&abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: msgs})
	assert.Equal(t, []string{"src/union.ts", "src/index.ts", "/site/footer.tsx"}, f.Files.Modified)
	require.Len(t, f.Changes, 3)
	assert.Equal(t, []string{"unionAsync"}, f.Changes[0].Added)
	assert.Contains(t, f.Changes[1].Line(), "union.ts")
	assert.Contains(t, f.Changes[2].Line(), "ShieldedButton")
}

// Roo Code's to-do list, markdown check boxes in one string, is the plan;
// the file its read_file names inside XML arguments is read.
func TestChecklistPlan(t *testing.T) {
	msgs := []abi.Message{
		pluginstest.User("restore the orphaned tasks"),
		pluginstest.Assistant("", pluginstest.Call("t1", "update_todo_list", pluginstest.Args{"todos": "[x] Audit the index\n[-] Rebuild the index for epita\n[ ] Verify in the UI\nnot a step"})),
		pluginstest.Result("t1", "Todo list updated successfully.", false),
		pluginstest.Assistant("", pluginstest.Call("r1", "read_file", pluginstest.Args{"args": "<file>\n  <path>src/index.ts</path>\n  <line_range>1-80</line_range>\n</file>"})),
		pluginstest.Result("r1", "1 | import x", false),
	}
	assert.Equal(t, []string{"src/index.ts"}, digest.Gather(&abi.SummarizeRequest{Messages: msgs}).Files.Read, "a file named in XML arguments is read")
	steps, ok := digest.Plan(digest.Calls(msgs))
	require.True(t, ok)
	assert.Equal(t, []digest.PlanStep{
		{Text: "Audit the index", Status: "completed"},
		{Text: "Rebuild the index for epita", Status: "in_progress"},
		{Text: "Verify in the UI", Status: "pending"},
	}, steps)
}

// A changed file's line says what the change is for, as the agent put it:
// the edit call's own instruction, else the message's announcement; a
// message that announces nothing lends no sentence.
func TestChangeSaysWhatItDoes(t *testing.T) {
	msgs := []abi.Message{
		pluginstest.User("make the footer show the badge"),
		pluginstest.Assistant("The package ships no types. I'll add a type declaration for react-shielded so tsc stops failing with TS7016.",
			pluginstest.Call("w1", "write", pluginstest.Args{"filePath": "/site/types/react-shielded.d.ts", "content": "declare module 'react-shielded';\n"})),
		pluginstest.Result("w1", "ok", false),
		pluginstest.Assistant("", pluginstest.Call("r1", "replace", pluginstest.Args{"file_path": "docs/SECURITY.md", "old_string": "a", "new_string": "b", "instruction": "Move the security policy under docs/."})),
		pluginstest.Result("r1", "ok", false),
		pluginstest.Assistant("Now I have full context on all files.", pluginstest.Call("e1", "edit", pluginstest.Args{"filePath": "/site/footer.tsx", "oldString": "a", "newString": "b"})),
		pluginstest.Result("e1", "ok", false),
	}
	f := digest.Gather(&abi.SummarizeRequest{Kind: abi.FoldHistory, Messages: msgs})
	require.Len(t, f.Changes, 3)
	assert.Equal(t, "I'll add a type declaration for react-shielded so tsc stops failing with TS7016.", f.Changes[0].Said)
	assert.Contains(t, f.Changes[0].Line(), "as the agent put it: “I'll add a type declaration")
	assert.NotContains(t, f.Changes[0].Brief(), "as the agent put it")
	assert.Equal(t, "Move the security policy under docs/.", f.Changes[1].Said)
	assert.Empty(t, f.Changes[2].Said)
}
