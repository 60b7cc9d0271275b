package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"

	"github.com/compact-host/compact-host/internal/tokencount"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loadCase is one request of the load test and what it must return.
type loadCase struct {
	name string
	path string
	body []byte
	want []byte // normalized answer of the request run alone
}

// loadCases are compactions and gate checks of different sessions, in
// every input form and output format, each with its own sizes.
func loadCases(t testing.TB) []loadCase {
	forms := []string{formats.Anthropic, formats.OpenAI, "canonical", "jsonl", "log"}
	outs := []string{"", formats.Canonical, formats.Anthropic, formats.OpenAI}
	var cases []loadCase
	for i := 0; i < 8; i++ {
		msgs := codingSession(100+i, 6+i, 400+50*i)
		req := CompactRequest{Session: encode(t, forms[i%len(forms)], msgs), OutputFormat: outs[i%len(outs)]}
		if i%3 == 1 {
			req.Options.Focus = fmt.Sprintf("the nil check of session %d", i)
		}
		if i%4 == 3 {
			req.Options.Strategy = "truncate"
		}
		body, _ := json.Marshal(req)
		cases = append(cases, loadCase{name: fmt.Sprintf("compact-%d", i), path: "/v1/compact", body: body})
	}
	for i := 0; i < 4; i++ {
		msgs := codingSession(200+i, 10+2*i, 500)
		body, _ := json.Marshal(CheckRequest{Session: encode(t, forms[i%len(forms)], msgs), Apply: i%2 == 0,
			Request: GateRequest{ToolSchemaTokens: tokencount.Tokens(1000 * i)}})
		cases = append(cases, loadCase{name: fmt.Sprintf("check-%d", i), path: "/v1/check", body: body})
	}
	return cases
}

// normalize drops what differs between two runs of the same request: the
// duration and the compaction's timestamp.
func normalize(body []byte) []byte {
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		return []byte("not JSON: " + err.Error())
	}
	if rep, ok := v["report"].(map[string]any); ok {
		delete(rep, "duration_ms")
	}
	if log, ok := v["session"].(string); ok {
		var lines []string
		for _, line := range bytes.Split([]byte(log), []byte("\n")) {
			var e map[string]any
			if json.Unmarshal(line, &e) == nil {
				if c, ok := e["compaction"].(map[string]any); ok {
					delete(c, "time")
				}
				b, _ := json.Marshal(e)
				line = b
			}
			lines = append(lines, string(line))
		}
		v["session"] = lines
	}
	out, _ := json.Marshal(v)
	return out
}

// validSession checks that an answer's session gives a valid context.
func validSession(body []byte) error {
	var r struct {
		Session json.RawMessage `json:"session"`
		Report  struct {
			OutputFormat string `json:"output_format"`
		} `json:"report"`
		OutputFormat string `json:"output_format"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return err
	}
	if len(r.Session) == 0 {
		return nil // a check without apply
	}
	msgs, err := readContext(r.Report.OutputFormat+r.OutputFormat, r.Session)
	if err != nil {
		return err
	}
	return host.Validate(msgs, false)
}

// TestConcurrentRequestsDoNotCrossTalk sends 16 clients × 8 requests over
// loopback, a mix of compactions and gate checks of different sessions:
// every answer must be valid and equal to the answer the same request
// gets alone.
func TestConcurrentRequestsDoNotCrossTalk(t *testing.T) {
	_, ts := start(t, nil)
	cases := loadCases(t)
	for i := range cases {
		r := call(t, ts, "POST", cases[i].path, cases[i].body)
		require.Equal(t, 200, r.Status, "%s alone: %s", cases[i].name, r.Body)
		require.NoError(t, validSession(r.Body), "%s alone", cases[i].name)
		cases[i].want = normalize(r.Body)
	}

	const clients, perClient = 16, 8
	type failure struct {
		client, n int
		name, msg string
	}
	var (
		mu       sync.Mutex
		failures []failure
		wg       sync.WaitGroup
	)
	fail := func(c, n int, name, format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, failure{c, n, name, fmt.Sprintf(format, args...)})
	}
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < perClient; n++ {
				lc := cases[(c*perClient+n*5)%len(cases)]
				r, err := do(ts, "POST", lc.path, lc.body)
				if err != nil {
					fail(c, n, lc.name, "%v", err)
					continue
				}
				if r.Status != 200 {
					fail(c, n, lc.name, "status %d: %.300s", r.Status, r.Body)
					continue
				}
				if err := validSession(r.Body); err != nil {
					fail(c, n, lc.name, "invalid session: %v", err)
					continue
				}
				if got := normalize(r.Body); !bytes.Equal(got, lc.want) {
					fail(c, n, lc.name, "differs from the answer alone:\n got %.400s\nwant %.400s", got, lc.want)
				}
			}
		}()
	}
	wg.Wait()
	for i, f := range failures {
		if i == 10 {
			assert.Fail(t, "more failures", "… and %d more", len(failures)-10)
			break
		}
		assert.Fail(t, "cross-talk", "client %d request %d (%s): %s", f.client, f.n, f.name, f.msg)
	}
}
