package formats_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/formats"
)

func ExampleRead() {
	request := `{
  "system": "You are terse.",
  "messages": [
    {"role": "user", "content": "List /tmp"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {"path": "/tmp"}}]}
  ]
}`
	s, err := formats.Read(strings.NewReader(request), "")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("format:", s.Format)
	for _, m := range s.Messages {
		fmt.Printf("%s %s pinned=%v:", m.Role, m.ID, m.Pinned)
		for _, b := range m.Content {
			switch b.Type {
			case abi.BlockToolResult:
				fmt.Printf(" %s(%s, error=%v)", b.Type, b.ToolUseID, b.IsError)
			default:
				fmt.Printf(" %s", b.Type)
			}
		}
		fmt.Println()
	}
	fmt.Println("repaired:", s.Repaired)
	// Output:
	// format: anthropic
	// system anthropic-system pinned=true: text
	// user anthropic-0 pinned=false: text
	// assistant anthropic-1 pinned=false: tool_use
	// user anthropic-1-results pinned=false: tool_result(t1, error=true)
	// repaired: map[missing_result:1]
}

func ExampleWrite() {
	msgs := []abi.Message{
		{ID: "u1", Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "hi"}}},
		{ID: "a1", Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockText, Text: "hello"}}},
	}
	if err := formats.Write(os.Stdout, formats.OpenAI, msgs); err != nil {
		fmt.Println(err)
	}
	// Output:
	// {
	//  "messages": [
	//   {
	//    "role": "user",
	//    "content": "hi"
	//   },
	//   {
	//    "role": "assistant",
	//    "content": "hello"
	//   }
	//  ]
	// }
}
