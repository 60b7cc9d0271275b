package formats

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
)

// decodeTargets are the types the readers decode records into.
var decodeTargets = []func() any{
	func() any { return new(ccRecord) },
	func() any { return new(codexLine) },
	func() any { return new(codexItem) },
	func() any { return new(copilotEvent) },
	func() any { return new(copilotData) },
	func() any { return new(canonicalLine) },
	func() any { return new(abi.Message) },
	func() any { return new([]apiBlock) },
	func() any { return new(string) },
	func() any { return new(anthropicDoc) },
	func() any { return new([]miniMessage) },
	func() any { return new([]sweMessage) },
	func() any { return new([]oaMessage) },
	func() any {
		return new(struct {
			Response struct {
				Usage *oaUsage `json:"usage"`
			} `json:"response"`
		})
	},
}

// assertDecodesAsJSON checks decode against json.Unmarshal for every
// target: the same value, or an error with the same message.
func assertDecodesAsJSON(t *testing.T, data []byte) {
	t.Helper()
	for _, target := range decodeTargets {
		want, got := target(), target()
		werr := json.Unmarshal(data, want)
		gerr := decode(data, got)
		if werr != nil {
			require.Error(t, gerr, "%T: decode accepted %q", got, data)
			assert.Equal(t, werr.Error(), gerr.Error(), "%T: %q", got, data)
			continue
		}
		require.NoError(t, gerr, "%T: %q", got, data)
		assert.True(t, reflect.DeepEqual(want, got), "%T: %q\njson:   %#v\ndecode: %#v", got, data, want, got)
		checked := target()
		require.NoError(t, decodeChecked(data, checked), "%T: %q", got, data)
		assert.True(t, reflect.DeepEqual(want, checked), "%T: %q\njson:   %#v\ndecodeChecked: %#v", got, data, want, checked)
	}
}

var decodeSeeds = []string{
	`{}`, `null`, `[]`, `"text"`, ` "pad" `, "\v{}", `{"type":"user","message":{"id":"m1","content":"hi"}}`,
	`{"type":"assistant","isSidechain":true,"message":{"content":[{"type":"text","text":"a\nb"},{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls"}}]}}`,
	`{"Type":"user","MESSAGE":{"content":[]}}`, `{"type":"user","type":"assistant"}`, `{"typ\u0065":"x"}`, `{"type":5}`, `{"type":null,"message":null}`,
	`{"isSidechain":"yes"}`, `{"isSidechain":null}`, `{"compactMetadata":{"trigger":"auto","preTokens":12.5}}`, `{"compactMetadata":{"preTokens":-0}}`,
	`{"compactMetadata":{"preTokens":99999999999999999999}}`, `{"payload":null}`, `{"payload": {"a":1} }`, `{"type":"response_item","payload":{"type":"message","content":[{"type":"output_text","text":"x"}],"encrypted_content":null}}`,
	`[{"type":"text","text":"a"},{"type":"tool_result","content":[{"type":"text","text":"b"}],"is_error":true}]`, `[1]`, `[{"type":"text"},]`,
	`{"data":{"toolRequests":[{"toolCallId":"c","arguments":"{}"}],"result":{"content":"ok"}}}`, "{\"text\":\"bad \xff\"}", `{"text":"\ud800"}`,
	`{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}],"pinned":true}`, `{"id":1}`, `{"content":"s"}`,
	`[{"role":"assistant","content":"x","tool_calls":[{"id":"c","type":"function","function":{"name":"bash","arguments":"{}"}}],"extra":{"response":{"usage":{"prompt_tokens":3}}}}]`,
	`[{"role":"tool","tool_call_id":"c","content":[{"type":"text","text":"out"}],"agent":"primary","message_type":"observation"}]`,
	`{"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":"hi"}],"model":"m"}`, `[{"Role":"user"}]`, `[{"extra":null}]`, `{"response":{"usage":{"prompt_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}}`, `{"response":{"usage":{"prompt_tokens":1.5}}}`,
}

func TestDecodeMatchesJSON(t *testing.T) {
	for _, s := range decodeSeeds {
		assertDecodesAsJSON(t, []byte(s))
	}
}

// TestDecodeCorpusLines compares decode with json.Unmarshal on every line of
// the corpus JSONL files, as every record type.
func TestDecodeCorpusLines(t *testing.T) {
	for _, c := range append(corpus, corpusNew...) {
		if !strings.HasSuffix(c.file, ".jsonl") {
			continue
		}
		t.Run(c.file, func(t *testing.T) {
			f, err := os.Open(c.path(t))
			require.NoError(t, err)
			defer f.Close()
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, maxLineSize)
			for sc.Scan() {
				assertDecodesAsJSON(t, sc.Bytes())
				var l codexLine
				if json.Unmarshal(sc.Bytes(), &l) == nil && len(l.Payload) > 0 {
					assertDecodesAsJSON(t, l.Payload)
				}
			}
			require.NoError(t, sc.Err())
		})
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { assertDecodesAsJSON(t, data) })
}

// TestDecodeCorpusDocuments compares decode with json.Unmarshal on the
// whole-document corpus files, as the trajectory readers decode them.
func TestDecodeCorpusDocuments(t *testing.T) {
	for _, c := range corpus {
		if strings.HasSuffix(c.file, ".jsonl") {
			continue
		}
		t.Run(c.file, func(t *testing.T) {
			data, err := os.ReadFile(corpusPath(t, c.file))
			require.NoError(t, err)
			var wantMini, gotMini struct {
				Messages []miniMessage `json:"messages"`
			}
			require.NoError(t, json.Unmarshal(data, &wantMini))
			require.NoError(t, decode(data, &gotMini))
			assert.True(t, reflect.DeepEqual(wantMini, gotMini), "as a mini-swe-agent trajectory")
			var wantSWE, gotSWE struct {
				History []sweMessage `json:"history"`
			}
			require.NoError(t, json.Unmarshal(data, &wantSWE))
			require.NoError(t, decode(data, &gotSWE))
			assert.True(t, reflect.DeepEqual(wantSWE, gotSWE), "as a SWE-agent trajectory")
		})
	}
}

// FuzzCompact holds compact to json.Compact.
func FuzzCompact(f *testing.F) {
	for _, s := range append(decodeSeeds, `{ "a" : [ 1 , "b c" , { } ] }`, "{\"s\":\" \\\" \\t \"\n}", `{"deep":`+strings.Repeat(`[`, 70)+strings.Repeat(`]`, 70)+`}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want bytes.Buffer
		werr := json.Compact(&want, b)
		got, ok := compact(b)
		require.Equal(t, werr == nil, ok, "%q", b)
		if ok {
			assert.Equal(t, want.String(), string(got), "%q", b)
		}
	})
}
