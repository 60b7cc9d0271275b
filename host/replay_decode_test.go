package host

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host/internal/jsondecode"
)

// assertEntryDecodes holds the replay's decoding of one log line to
// json.Unmarshal's: the same entry, or the same error; and the check for
// text read as U+FFFD, narrowed by what the decode found in the strings,
// to the check of the whole line.
func assertEntryDecodes(t *testing.T, line []byte) {
	t.Helper()
	var want, got Entry
	wantErr := json.Unmarshal(line, &want)
	flags, gotErr := jsondecode.DecodeFlags(line, &got)
	assert.Equal(t, invalidUTF8(line, -1), invalidUTF8(line, flags), "%q (flags %d)", line, flags)
	if wantErr != nil {
		require.Error(t, gotErr, "%q", line)
		assert.Equal(t, wantErr.Error(), gotErr.Error(), "%q", line)
		return
	}
	require.NoError(t, gotErr, "%q", line)
	assert.True(t, reflect.DeepEqual(want, got), "%q\njson:   %#v\ndecode: %#v", line, want, got)
}

// entrySeeds are log lines of every entry type.
var entrySeeds = []string{
	`{"type":"message","message":{"id":"m1","role":"user","content":[{"type":"text","text":"hi \u00e9\ud83d\ude00"}],"pinned":true}}`,
	`{"type":"message","message":{"id":"m2","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"path":"a.go"}}],"usage":{"input_tokens":5,"output_tokens":2}}}`,
	`{"type":"message","message":{"id":"m3","role":"user","content":[{"type":"tool_result","tool_use_id":"t1","text":"x","is_error":true},{"type":"image","media_type":"image/png","data":"iVBORw0K"}]}}`,
	`{"type":"compaction","compaction":{"id":"c1","folded_through":"m2","summary":"s","strategy":"structured","tokens_before":10,"tokens_after":3,"messages_folded":2,"time":"2026-01-02T03:04:05Z"}}`,
	`{"type":"prune","prune":{"message_id":"m3","block":0,"text":"[pruned]"}}`,
	`{"type":"undo","undo":{"compaction":"c1"}}`,
	`{"type":"message","message":{"ID":"m4","Role":"user","content":null}}`,
	`{"type":"message","message":{"id":"m5","role":"user","content":[{"type":"text","text":5}]}}`,
	`{"type":"message","message":{"id":"m6","role":"user","content":[{"type":"text","text":"a"}],"usage":{"input_tokens":1.5}}}`,
	`{"type":"message","message":{"id":"m7","role":"user","content":[{"type":"text","text":"a"}]},"extra":[1,{"a":null}]}`,
	`{"type":"message","message":{"id":"m8"`,
	`{"type":"message","message":{"id":"m9","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"p":"\udc00 caf` + "\xe9" + `"}}]}}`,
	`{"type":"message","message":{"id":"m10","role":"user","content":[{"type":"text","text":"\ud83d\u0041 \u003c"}],"note":"` + "\xff" + `"}}`,
}

// The replay decodes every line of the corpus sessions' logs, and lines of
// every entry type, as json.Unmarshal does.
func TestReplayDecodesAsJSON(t *testing.T) {
	for _, s := range entrySeeds {
		assertEntryDecodes(t, []byte(s))
	}
	for _, name := range corpusFiles {
		t.Run(name, func(t *testing.T) {
			msgs := corpusMessages(t, name)
			e, err := New(Config{ContextWindow: 1 << 30, Tokenizer: "chars"})
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), "session.jsonl")
			s, err := e.OpenSession(path)
			require.NoError(t, err)
			require.NoError(t, s.Append(msgs...))
			var log bytes.Buffer
			require.NoError(t, s.WriteLog(&log))
			require.NoError(t, s.Close())
			for _, line := range bytes.Split(bytes.TrimSpace(log.Bytes()), []byte("\n")) {
				assertEntryDecodes(t, line)
			}
		})
	}
}

func FuzzReplayDecode(f *testing.F) {
	for _, s := range entrySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		assertEntryDecodes(t, line)
	})
}
