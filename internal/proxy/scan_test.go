package proxy

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScanRequest(t *testing.T) {
	body := []byte(" {\"model\" : \"m\",\"sys\\u0074em\":[{\"text\":\"a \\\"quoted\\\\\\\" } ] [\"}],\n\"messages\":[ {\"role\":\"user\",\"content\":\"x]}\"} ,{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"\\\\\"}]}\t],\"n\":-1.5e3,\"b\":true,\"z\":null} \n")
	r, err := scanRequest(body)
	require.NoError(t, err)
	assert.Equal(t, `"m"`, string(r.field("model")))
	assert.Equal(t, `[{"text":"a \"quoted\\\" } ] ["}]`, string(r.field("system")), "an escaped key is found by its value")
	assert.Equal(t, `-1.5e3`, string(r.field("n")))
	assert.Equal(t, `true`, string(r.field("b")))
	assert.Equal(t, `null`, string(r.field("z")))
	require.Len(t, r.msgs, 2)
	assert.Equal(t, `{"role":"user","content":"x]}"}`, string(r.msg(0)))
	assert.Equal(t, `{"role":"assistant","content":[{"type":"text","text":"\\"}]}`, string(r.msg(1)))

	empty, err := scanRequest([]byte(`{"messages":[]}`))
	require.NoError(t, err)
	assert.Empty(t, empty.msgs)

	for _, bad := range []string{
		``, `[]`, `{}`, `{"messages":[}`, `{"messages":[{"a":1}`, `{"messages":{}}`, `{"model":"x"}`,
		`{"messages":[1]}`, `{"messages":[],"messages":[]}`, `{"messages":[]} x`, `{"a" 1,"messages":[]}`,
		`{"messages":["unterminated]}`,
	} {
		_, err := scanRequest([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
}

// FuzzScanRequest checks the scanner against encoding/json on objects it
// accepts: every field it finds decodes to the value json finds, and the
// messages split into the array's elements.
func FuzzScanRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a\"b\\"}]},{"role":"assistant","content":"x"}],"tools":[]}`))
	f.Add([]byte(`{"messages":[ ],"x":{"y":[1,2,{"z":"]"}]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := scanRequest(body)
		if err != nil || !json.Valid(body) {
			return
		}
		var fields map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(body, &fields))
		require.Equal(t, len(fields), len(r.fields))
		for k, v := range fields {
			var a, b any
			require.NoError(t, json.Unmarshal(v, &a))
			require.NoError(t, json.Unmarshal(r.field(k), &b), "field %q", k)
			require.Equal(t, a, b)
		}
		var msgs []json.RawMessage
		require.NoError(t, json.Unmarshal(fields["messages"], &msgs))
		require.Len(t, r.msgs, len(msgs))
		for i := range msgs {
			require.JSONEq(t, string(msgs[i]), string(r.msg(i)))
		}
	})
}

func TestModelFamily(t *testing.T) {
	for in, want := range map[string]string{
		"claude-sonnet-4-5-20250929": "claude-sonnet-4-5",
		"claude-sonnet-4-5":          "claude-sonnet-4-5",
		"gpt-4o-2024-08-06":          "gpt-4o",
		"GPT-4o":                     "gpt-4o",
		"qwen2.5:7b":                 "qwen2.5:7b",
		"o1-12345678x":               "o1-12345678x",
	} {
		assert.Equal(t, want, modelFamily(in), in)
	}
}

func TestCompactionModelAndBase(t *testing.T) {
	up, _ := url.Parse("https://gateway.example/api")
	p := &Proxy{o: Options{Upstream: up}}
	for _, tc := range []struct{ kind, model, want string }{
		{KindAnthropic, "claude-sonnet-4-5", "claude-haiku-4-5"},
		{KindAnthropic, "claude-haiku-4-5", "claude-haiku-4-5"},
		{KindOpenAI, "gpt-4o", "gpt-4.1-mini"},
		{KindOpenAI, "gpt-4o-mini", "gpt-4o-mini"}, // already cheaper
		{KindOpenAI, "qwen2.5:7b", "qwen2.5:7b"},   // unknown: the request's own
		{KindOpenAI, "claude-sonnet-4-5", "claude-sonnet-4-5"},
	} {
		x := &exchange{p: p, kind: tc.kind, model: tc.model}
		assert.Equal(t, tc.want, x.compactionModel(), "%s %s", tc.kind, tc.model)
	}
	p.o.CompactionModel = "my-model"
	assert.Equal(t, "my-model", (&exchange{p: p, kind: KindOpenAI, model: "gpt-4o"}).compactionModel())

	assert.Equal(t, "https://gateway.example/api/", (&exchange{p: p, kind: KindAnthropic, path: "/v1/messages"}).providerBase())
	assert.Equal(t, "https://gateway.example/api/v1/", (&exchange{p: p, kind: KindOpenAI, path: "/v1/chat/completions"}).providerBase())
	assert.Equal(t, "https://gateway.example/api/openai/deployments/x/", (&exchange{p: p, kind: KindOpenAI, path: "/openai/deployments/x/chat/completions"}).providerBase())
}

func TestConversationID(t *testing.T) {
	p := &Proxy{}
	id := func(body string) string {
		r, err := scanRequest([]byte(body))
		require.NoError(t, err)
		x := &exchange{p: p, kind: KindAnthropic, raw: r}
		json.Unmarshal(r.field("model"), &x.model)
		return x.conversationID()
	}
	first := id(`{"model":"claude-sonnet-4-5","system":"s","messages":[{"role":"user","content":"task"}]}`)
	assert.Equal(t, first, id(`{"model":"claude-sonnet-4-5-20250929","system":"s","max_tokens":9,"messages":[{"role":"user","content":"task"},{"role":"assistant","content":"ok"},{"role":"user","content":"more"}]}`),
		"later turns and a dated model name are the same conversation")
	assert.NotEqual(t, first, id(`{"model":"claude-sonnet-4-5","system":"t","messages":[{"role":"user","content":"task"}]}`))
	assert.NotEqual(t, first, id(`{"model":"claude-sonnet-4-5","system":"s","messages":[{"role":"user","content":"other"}]}`))
	assert.NotEqual(t, first, id(`{"model":"claude-haiku-4-5","system":"s","messages":[{"role":"user","content":"task"}]}`))

	// Two sessions that open with the same harness messages differ by the
	// user's first request, and each keeps its ID as it grows.
	harness := `{"role":"user","content":"# AGENTS.md instructions for /src\n\nrun go test"},{"role":"user","content":"<environment_context>\n<cwd>/src</cwd>\n</environment_context>"}`
	a := id(`{"model":"claude-sonnet-4-5","system":"s","messages":[` + harness + `,{"role":"user","content":"fix the parser"}]}`)
	b := id(`{"model":"claude-sonnet-4-5","system":"s","messages":[` + harness + `,{"role":"user","content":"write the docs"}]}`)
	assert.NotEqual(t, a, b)
	assert.Equal(t, a, id(`{"model":"claude-sonnet-4-5","system":"s","messages":[`+harness+`,{"role":"user","content":"fix the parser"},{"role":"assistant","content":"ok"},{"role":"user","content":"more"}]}`))
}
