package realagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compact-host/compact-host/host"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openCodeInstallHint installs the pinned opencode.
const openCodeInstallHint = "(cd internal/realagent/testdata/opencode && npm ci --no-audit --no-fund)"

// openCodeBin is the pinned opencode binary, or skips the test (fails it
// with CI=true) when it is not installed.
func openCodeBin(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "opencode", "node_modules", "opencode-linux-x64", "bin", "opencode"))
	require.NoError(t, err)
	if _, err := os.Stat(p); err != nil {
		why := "opencode is not installed: run " + openCodeInstallHint
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s", why)
		}
		t.Skip(why)
	}
	return p
}

// openCodeRun is what one opencode run did.
type openCodeRun struct {
	Args           []string
	Stdout, Stderr []byte
	// Other are the requests for any host but loopback, recorded and
	// refused.
	Other []Request
}

// runOpenCode runs `opencode run --pure <prompt>` in work with a home of
// its own under dir: its Anthropic provider's baseURL is base (a proxy),
// the model anthropic/claude-sonnet-4-5, no models fetch, npm offline,
// every proxy variable at a recorder that refuses what would leave the
// machine.
func runOpenCode(t *testing.T, bin, dir, work, base, prompt string) *openCodeRun {
	t.Helper()
	catch, err := StartUpstream("")
	require.NoError(t, err)
	defer catch.Close()
	home := filepath.Join(dir, "home")
	config := filepath.Join(home, ".config", "opencode")
	require.NoError(t, os.MkdirAll(config, 0o700))
	require.NoError(t, os.MkdirAll(work, 0o700))
	cfg, err := json.Marshal(map[string]any{
		"$schema": "https://opencode.ai/config.json",
		"model":   "anthropic/claude-sonnet-4-5",
		"provider": map[string]any{"anthropic": map[string]any{"options": map[string]any{
			"baseURL": base + "/v1", "apiKey": "sk-ant-realagent-dummy"}}},
		"autoupdate": false, "share": "disabled",
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(config, "opencode.json"), cfg, 0o600))
	run := &openCodeRun{Args: []string{bin, "run", "--pure", prompt}}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	env := []string{"HOME=" + home, "TMPDIR=" + dir, "LANG=C.UTF-8", "NO_COLOR=1", "TERM=dumb",
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), "XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1", "npm_config_offline=true",
		"HTTP_PROXY=" + catch.URL(), "HTTPS_PROXY=" + catch.URL(), "http_proxy=" + catch.URL(), "https_proxy=" + catch.URL(),
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost"}
	run.Stdout, run.Stderr, err = runGroup(ctx, run.Args, env, work)
	run.Other = catch.Requests()
	require.NoError(t, err, "%s\nstdout: %s\nstderr: %s", strings.Join(run.Args, " "), tail(run.Stdout), tail(run.Stderr))
	return run
}

// openCodeModel is the model the runs ask for; opencode's title calls go
// to its small model and are told apart by it.
const openCodeModel = "claude-sonnet-4-5"

// agentCalls keeps the calls of bodies that ask for openCodeModel.
func agentCalls(t *testing.T, bodies [][]byte) [][]byte {
	t.Helper()
	var out [][]byte
	for _, b := range bodies {
		var req struct {
			Model string `json:"model"`
		}
		require.NoError(t, json.Unmarshal(b, &req))
		if req.Model == openCodeModel {
			out = append(out, b)
		}
	}
	return out
}

// openCodeCallID matches the IDs of the scripted calls.
var openCodeCallID = regexp.MustCompile(`toolu_opencode(\d{2})`)

// openCodeScript answers opencode's title call with a title, and its
// agent's calls with one read of a notes file per call, by the number of
// tool results the call carries, then the closing answer.
func openCodeScript(work string, steps int) func(n int, body []byte) []block {
	return func(_ int, body []byte) []block {
		if !bytes.Contains(body, []byte(`"model":"`+openCodeModel+`"`)) {
			return []block{{Type: "text", Text: "Reading notes"}}
		}
		// The next step follows the newest call the request answers: a
		// compacted request no longer carries every earlier one.
		step := 0
		for _, m := range openCodeCallID.FindAllSubmatch(body, -1) {
			n, _ := strconv.Atoi(string(m[1]))
			step = max(step, n+1)
		}
		if step >= steps-1 {
			return []block{{Type: "text", Text: "OPENCODE-DONE: every file was read."}}
		}
		input, _ := json.Marshal(map[string]string{"filePath": filepath.Join(work, noteFile(step))})
		return []block{{Type: "tool_use", ID: fmt.Sprintf("toolu_opencode%02d", step), Name: "read", Input: input}}
	}
}

// TestOpenCodeThroughProxy runs opencode through the proxy for one short
// answer: its calls go upstream as sent, and its answer comes back.
func TestOpenCodeThroughProxy(t *testing.T) {
	bin := openCodeBin(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	work := filepath.Join(dir, "work")
	up := newScriptedAnthropic(t, openCodeScript(work, 1))
	rig := startProxy(t, up.srv.URL, host.Config{ContextWindow: 200_000})
	run := runOpenCode(t, bin, dir, work, rig.url, "Say that you are done.")
	assert.Contains(t, string(run.Stdout), "OPENCODE-DONE")
	assert.Empty(t, run.Other, "opencode reached for another host")
	sent, got := rig.sentCalls(), up.calls
	agentGot, _ := got()
	require.NotEmpty(t, agentCalls(t, sent))
	require.Equal(t, len(sent), len(agentGot))
	for i := range sent {
		assert.Equal(t, string(sent[i]), string(agentGot[i]), "call %d went as sent", i)
	}
	assert.Positive(t, rig.metric(t, `compact_host_proxy_requests_total{action="forwarded",kind="anthropic"`), "the proxy read the calls")
}

// TestOpenCodeConversationThroughProxy runs a 13-step opencode
// conversation through the proxy at a small window: it is compacted once,
// and every later step carries the same replacement bytes and the kept
// messages as opencode sent them.
func TestOpenCodeConversationThroughProxy(t *testing.T) {
	bin := openCodeBin(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	work := filepath.Join(dir, "work")
	writeNotes(t, work)
	up := newScriptedAnthropic(t, openCodeScript(work, conversationCalls))
	// opencode's system prompt and tools are about 8k tokens: at a 35k
	// window less an 8k reply, the compaction point is about eight steps in.
	rig := startProxy(t, up.srv.URL, host.Config{ContextWindow: 35_000, MaxOutputTokens: 8_000, KeepRecentTokens: 3_000})
	run := runOpenCode(t, bin, dir, work, rig.url, "Read each notes file in turn.")
	assert.Contains(t, string(run.Stdout), "OPENCODE-DONE")
	assert.Empty(t, run.Other, "opencode reached for another host")
	all, sums := up.calls()
	sent, got := agentCalls(t, rig.sentCalls()), agentCalls(t, all)
	require.Len(t, sent, conversationCalls, "opencode's agent calls")
	require.Len(t, got, conversationCalls)
	checkCompactedOnce(t, rig, sent, got, false)
	assert.NotEmpty(t, sums, "the proxy's strategy asked for its summary")
}
