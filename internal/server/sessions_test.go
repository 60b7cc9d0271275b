package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sessionOptions compact a session at half the test budget, keeping a
// few thousand tokens, so a modest conversation crosses the threshold a
// few times.
var sessionOptions = map[string]any{"keep_recent_tokens": 1500, "threshold": 0.5}

func startWithStore(t testing.TB, st store.Store) *httptest.Server {
	t.Helper()
	_, ts := start(t, func(o *Options) { o.Store = st })
	return ts
}

// putSession creates id from msgs (canonical) and checks the answer.
func putSession(t testing.TB, ts *httptest.Server, id string, msgs []abi.Message) SessionUpdate {
	t.Helper()
	r := call(t, ts, http.MethodPut, "/v1/sessions/"+id, map[string]any{"session": encode(t, "canonical", msgs), "options": sessionOptions})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var up SessionUpdate
	require.NoError(t, json.Unmarshal(r.Body, &up))
	return up
}

// appendTo posts msgs, rendered in format, to id.
func appendTo(t testing.TB, ts *httptest.Server, id, format string, msgs []abi.Message) SessionUpdate {
	t.Helper()
	r := call(t, ts, http.MethodPost, "/v1/sessions/"+id+"/messages", map[string]any{"messages": messagesIn(t, format, msgs), "format": format})
	var up SessionUpdate
	r.decode(t, &up)
	return up
}

// messagesIn is msgs as the array a client of format sends.
func messagesIn(t testing.TB, format string, msgs []abi.Message) json.RawMessage {
	t.Helper()
	if format == formats.Canonical {
		b, err := json.Marshal(msgs)
		require.NoError(t, err)
		return b
	}
	var out []json.RawMessage
	// One message at a time, as an agent adds them: each rendering
	// stands alone, with no context to match its tool blocks against.
	for _, m := range msgs {
		var b bytes.Buffer
		require.NoError(t, formats.Write(&b, format, []abi.Message{m}))
		var doc struct{ Messages []json.RawMessage }
		require.NoError(t, json.Unmarshal(b.Bytes(), &doc))
		out = append(out, doc.Messages...)
	}
	b, err := json.Marshal(out)
	require.NoError(t, err)
	return b
}

func getSession(t testing.TB, ts *httptest.Server, id, format string) SessionView {
	t.Helper()
	var v SessionView
	call(t, ts, http.MethodGet, "/v1/sessions/"+id+"?output_format="+format, nil).decode(t, &v)
	return v
}

// canonicalContext reads a GET's canonical messages.
func canonicalContext(t testing.TB, v SessionView) []abi.Message {
	t.Helper()
	var msgs []abi.Message
	require.NoError(t, json.Unmarshal(v.Messages, &msgs))
	return msgs
}

// chunks splits msgs into appends of 1 to 3 messages, so that calls and
// their results often arrive in different appends.
func chunks(msgs []abi.Message) [][]abi.Message {
	var out [][]abi.Message
	for i, n := 0, 0; i < len(msgs); n++ {
		size := min(1+n%3, len(msgs)-i)
		out = append(out, msgs[i:i+size])
		i += size
	}
	return out
}

func countBlocks(msgs []abi.Message, typ string) int {
	n := 0
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == typ {
				n++
			}
		}
	}
	return n
}

func TestSessionAppendOnlyFlow(t *testing.T) {
	for _, format := range []string{formats.Canonical, formats.Anthropic, formats.OpenAI} {
		t.Run(format, func(t *testing.T) {
			ts := startWithStore(t, store.NewMemory())
			conv := codingSession(7, 14, 700)
			up := putSession(t, ts, "agent-1", conv[:2])
			assert.Equal(t, int64(1), up.Revision)
			assert.Equal(t, "none", up.Action)
			assert.True(t, up.Created)

			compactions, rev := 0, up.Revision
			for _, c := range chunks(conv[2:]) {
				up := appendTo(t, ts, "agent-1", format, c)
				assert.Equal(t, rev+1, up.Revision, "one write per append")
				rev = up.Revision
				assert.Equal(t, len(c), up.Appended)
				assert.Empty(t, up.Warnings, "nothing was repaired")
				if up.Action == "compacted" {
					compactions++
					require.NotNil(t, up.Report)
					assert.Greater(t, up.Report.TokensBefore, up.Report.TokensAfter)
					assert.NotEmpty(t, up.Report.Strategy)
				}
				assert.Equal(t, compactions, up.Compactions)
				assert.Less(t, up.Tokens, int(0.5*18000), "the session stays under its threshold after each append")
			}
			require.GreaterOrEqual(t, compactions, 2, "the conversation crossed the threshold more than once")

			v := getSession(t, ts, "agent-1", formats.Canonical)
			assert.Equal(t, rev, v.Revision)
			assert.Equal(t, compactions, v.Compactions)
			assert.NotEmpty(t, v.Summary)
			assert.False(t, v.UpdatedAt.IsZero())
			msgs := canonicalContext(t, v)
			require.NoError(t, host.Validate(msgs, true), "the context is sendable")
			assert.Equal(t, countBlocks(msgs, abi.BlockToolUse), countBlocks(msgs, abi.BlockToolResult), "calls and results matched across appends")
			assert.NotContains(t, string(v.Messages), formats.MissingResultText, "no result was made up")
			// The newest messages are verbatim.
			last := conv[len(conv)-1]
			assert.Equal(t, last.Content[0].Text, msgs[len(msgs)-1].Content[0].Text)
			assert.True(t, msgs[0].Summary || msgs[1].Summary, "the summary leads the context")

			for _, out := range []string{formats.Anthropic, formats.OpenAI} {
				v := getSession(t, ts, "agent-1", out)
				assert.Equal(t, out, v.OutputFormat)
				doc := map[string]json.RawMessage{"messages": v.Messages}
				if len(v.System) > 0 {
					doc["system"] = v.System
				}
				b, err := json.Marshal(doc)
				require.NoError(t, err)
				s, err := formats.Read(bytes.NewReader(b), out)
				require.NoError(t, err, "the %s messages read back", out)
				assert.Empty(t, s.Repaired, "the %s messages needed no repair", out)
				assert.Equal(t, countBlocks(msgs, abi.BlockToolUse), countBlocks(s.Messages, abi.BlockToolUse))
			}
		})
	}
}

// TestTrimmedLogReplaysToTheSameContext checks the stored form of a
// session: replaying it gives the context it was written from and the
// summary a next compaction merges.
func TestTrimmedLogReplaysToTheSameContext(t *testing.T) {
	e, err := host.New(testConfig, host.WithPlugins(registry))
	require.NoError(t, err)
	sess := e.NewSession()
	msgs := codingSession(3, 8, 600)
	msgs[0].Pinned = true
	msgs[1].Pinned = true
	require.NoError(t, sess.Append(msgs...))
	for round := range 2 {
		_, err = e.Compact(context.Background(), sess, host.CompactOptions{})
		require.NoError(t, err)
		require.NoError(t, sess.Append(codingSession(10+round, 2, 600)[1:]...))
		c := activeCompaction(sess)
		require.NotNil(t, c)
		log, err := trimmedLog(sess, c)
		require.NoError(t, err)
		again, err := e.ReadSession(bytes.NewReader(log), "trimmed")
		require.NoError(t, err)
		assert.Equal(t, sess.Context(), again.Context())
		assert.Equal(t, c.Summary, activeCompaction(again).Summary)
		assert.Less(t, again.Len(), sess.Len(), "the folded history was left out")
		sess = again
		// The next append's IDs must not clash with the kept ones.
		require.NoError(t, sess.Append(codingSession(20+round, 1, 100)[1:]...))
	}
}

// TestSessionResultsAfterPutOpenCalls puts a session that ends on open
// tool calls, then appends their results, as the reference allows: the
// stored calls must wait for their results as appended ones do, and no
// appended message may take the ID of a stored one.
func TestSessionResultsAfterPutOpenCalls(t *testing.T) {
	for _, putFormat := range []string{formats.Canonical, "log", formats.Anthropic, formats.OpenAI} {
		for _, format := range []string{formats.Canonical, formats.Anthropic, formats.OpenAI} {
			t.Run(putFormat+"/"+format, func(t *testing.T) {
				ts := startWithStore(t, store.NewMemory())
				conv := codingSession(9, 8, 600)
				require.Equal(t, abi.RoleAssistant, conv[2].Role)
				require.Equal(t, 2, countBlocks(conv[2:3], abi.BlockToolUse), "the put ends on open calls")
				r := call(t, ts, http.MethodPut, "/v1/sessions/open-calls", map[string]any{
					"session": encode(t, putFormat, conv[:3]), "format": strings.Replace(putFormat, "log", "canonical", 1), "options": sessionOptions})
				require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
				var up SessionUpdate
				require.NoError(t, json.Unmarshal(r.Body, &up))
				assert.Empty(t, up.Warnings, "open calls at the end need no repair")
				stored := canonicalContext(t, getSession(t, ts, "open-calls", formats.Canonical))
				assert.Len(t, stored, 3)
				assert.Zero(t, countBlocks(stored, abi.BlockToolResult), "no result was made up for the open calls")

				up = appendTo(t, ts, "open-calls", format, conv[3:4])
				assert.Equal(t, 1, up.Appended)
				assert.Empty(t, up.Warnings, "the results matched their calls")
				msgs := canonicalContext(t, getSession(t, ts, "open-calls", formats.Canonical))
				require.Len(t, msgs, 4)
				assert.Equal(t, conv[3].Content, msgs[3].Content, "the appended results are the client's")
				assert.Equal(t, stored, msgs[:3], "the stored messages are unchanged")

				compactions := 0
				for _, c := range chunks(conv[4:]) {
					up := appendTo(t, ts, "open-calls", format, c)
					assert.Equal(t, len(c), up.Appended)
					compactions = up.Compactions
					msgs := canonicalContext(t, getSession(t, ts, "open-calls", formats.Canonical))
					require.NoError(t, host.Validate(msgs, true), "the context is sendable")
					ids := map[string]bool{}
					for _, m := range msgs {
						assert.NotEmpty(t, m.ID)
						assert.False(t, ids[m.ID], "message ID %s is used twice", m.ID)
						ids[m.ID] = true
					}
				}
				assert.Positive(t, compactions, "the appends crossed the threshold")
				msgs = canonicalContext(t, getSession(t, ts, "open-calls", formats.Canonical))
				assert.Equal(t, countBlocks(msgs, abi.BlockToolUse), countBlocks(msgs, abi.BlockToolResult), "calls and results matched")
				assert.NotContains(t, string(mustJSON(t, msgs)), formats.MissingResultText, "no result was made up")
			})
		}
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
