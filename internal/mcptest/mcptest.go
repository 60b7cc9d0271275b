// Package mcptest calls the tools of an MCP server in tests, as a client
// reads them: the text of the answer and whether it is a tool error.
package mcptest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// CallTimeout bounds one call made by Call.
const CallTimeout = 30 * time.Second

// CallTool calls tool with args and returns the text of the answer and
// whether it is a tool error. An answer with content other than text is an
// error: the recall tools answer text only.
func CallTool(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) (string, bool, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", false, err
	}
	var b strings.Builder
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			return "", false, fmt.Errorf("mcptest: %s answered content of type %T", tool, c)
		}
		b.WriteString(tc.Text)
	}
	return b.String(), res.IsError, nil
}

// Call is CallTool within CallTimeout, failing t on an error of the call
// itself (a tool error is an answer).
func Call(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
	defer cancel()
	text, isErr, err := CallTool(ctx, cs, tool, args)
	require.NoError(t, err)
	return text, isErr
}
