package recallmcp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/recall"
	"github.com/compact-host/compact-host/internal/mcptest"
	"github.com/compact-host/compact-host/internal/recallmcp"
)

type fixed struct{ x *recall.Index }

func (f fixed) Index(context.Context) (*recall.Index, error) { return f.x, nil }

func conversation(opening string, n int) ([]abi.Message, recall.Key) {
	msgs := []abi.Message{{ID: "u0", Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: opening}}}}
	for i := range n {
		msgs = append(msgs,
			abi.Message{ID: fmt.Sprintf("a%d", i), Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockToolUse, ID: fmt.Sprintf("call_%d", i), Name: "Bash", Input: []byte(`{}`)}}},
			abi.Message{ID: fmt.Sprintf("r%d", i), Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: fmt.Sprintf("call_%d", i), Text: fmt.Sprintf("secret-%s-%d\n", opening, i) + strings.Repeat("x", 2000)}}},
		)
	}
	k, _ := recall.KeyFor(msgs)
	return msgs, k
}

func httpClient(t *testing.T, url, token string) (*mcp.ClientSession, error) {
	t.Helper()
	hc := &http.Client{Timeout: 30 * time.Second}
	if token != "" {
		hc.Transport = bearer{token}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// Over streamable HTTP with a token: the right token reaches the tools,
// a wrong or missing one gets 401, a body over the limit 413; a marker
// of another conversation (as another tenant's would be) is a tool error
// that leaks nothing; concurrent calls each get their own answer.
func TestHTTPServer(t *testing.T) {
	msgs, key := conversation("mine", 40)
	srv := recallmcp.NewServer(fixed{recall.New(msgs, key)}, "test")
	ts := httptest.NewServer(recallmcp.Handler(srv, recallmcp.HTTPOptions{Tokens: []string{"s3cret"}}))
	defer ts.Close()

	_, err := httpClient(t, ts.URL, "")
	require.Error(t, err, "no token connected")
	_, err = httpClient(t, ts.URL, "wrong")
	require.Error(t, err, "a wrong token connected")
	for _, auth := range []string{"", "Bearer wrong", "Basic czNjcmV0"} {
		req, _ := http.NewRequest("POST", ts.URL, strings.NewReader(`{}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, auth)
	}
	req, _ := http.NewRequest("POST", ts.URL, strings.NewReader(strings.Repeat(" ", recallmcp.MaxBodyBytes+1)))
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)

	cs, err := httpClient(t, ts.URL, "s3cret")
	require.NoError(t, err)
	defer cs.Close()

	text, isErr := mcptest.Call(t, cs, recallmcp.ToolRecall, map[string]any{"ref": "[recall:" + key.ToolRef("call_3") + "]"})
	require.False(t, isErr, text)
	assert.Contains(t, text, "secret-mine-3")

	_, other := conversation("theirs", 40)
	for _, ref := range []string{other.ToolRef("call_3"), other.SpanRef("a1", "r2")} {
		text, isErr = mcptest.Call(t, cs, recallmcp.ToolRecall, map[string]any{"ref": ref})
		assert.True(t, isErr)
		assert.NotContains(t, text, "secret-")
	}
	text, isErr = mcptest.Call(t, cs, recallmcp.ToolSearch, map[string]any{"query": `secret-mine-(7|8)\b`, "regexp": true})
	require.False(t, isErr, text)
	assert.Equal(t, 2, strings.Count(text, "[recall:t-"), text)

	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: recallmcp.ToolRecall, Arguments: map[string]any{"ref": key.ToolRef(fmt.Sprintf("call_%d", i))}})
			if assert.NoError(t, err) && assert.False(t, res.IsError) {
				assert.Contains(t, res.Content[0].(*mcp.TextContent).Text, fmt.Sprintf("secret-mine-%d\n", i))
			}
		})
	}
	wg.Wait()
}
