package eval

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/plugin"
)

var ctx = context.Background()

// forgetful summarizes by naming nothing, so whatever the context names
// after a compaction comes from the kept messages or the host's checks.
var forgetful = host.StrategyFunc(func(_ context.Context, _ plugin.Services, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
	return &abi.SummarizeResponse{Summary: fmt.Sprintf("%d messages happened.", len(req.Messages)), Offline: true}, nil
})

// workSession is turns of: a request, a read of /src/r<i>.go with a long
// result, an edit of /src/w<i>.go, and a closing reply.
func workSession(turns int) []abi.Message {
	var msgs []abi.Message
	for i := range turns {
		read, edit := fmt.Sprintf("r%d", i), fmt.Sprintf("w%d", i)
		msgs = append(msgs,
			userText(fmt.Sprintf("Step %d: port the parser change to w%d.go", i, i)),
			assistantCall(read, "Read", fmt.Sprintf(`{"file_path":"/src/r%d.go"}`, i)),
			toolResults(result(read, strings.Repeat(fmt.Sprintf("line of r%d.go\n", i), 100))),
			assistantCall(edit, "Edit", fmt.Sprintf(`{"file_path":"/src/w%d.go","old_string":"a","new_string":"b"}`, i)),
			toolResults(result(edit, "ok")),
			abi.Message{Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockText, Text: fmt.Sprintf("Step %d done.", i)}}},
		)
	}
	for i := range msgs {
		msgs[i].ID = fmt.Sprintf("m%d", i)
	}
	return msgs
}

// filesBefore counts, independently of the engine, the files read and
// edited in msgs[:cut] of a workSession.
func filesBefore(msgs []abi.Message, cut int) (read, modified int) {
	for _, m := range msgs[:cut] {
		for _, b := range m.Content {
			switch {
			case b.Type == abi.BlockToolUse && b.Name == "Read":
				read++
			case b.Type == abi.BlockToolUse && b.Name == "Edit":
				modified++
			}
		}
	}
	return read, modified
}

func TestReplayMeasuresEachCompaction(t *testing.T) {
	msgs := workSession(30)
	r := replay(ctx, replayConfig{session: &formats.Session{Messages: msgs}, name: "work", window: 8000, strategy: "forgetful", impl: forgetful})
	if r.Err != "" {
		t.Fatal(r.Err)
	}
	if want := 3 * 30; r.Calls != want || r.Gates != want || len(r.Series) != want {
		t.Fatalf("calls %d, gates %d, points %d; want %d of each (one per assistant message)", r.Calls, r.Gates, len(r.Series), want)
	}
	if r.ValidGates != r.Gates {
		t.Errorf("validity %d/%d: %v", r.ValidGates, r.Gates, r.Invalid)
	}
	if len(r.Compactions) < 2 {
		t.Fatalf("%d compactions; the session is several windows long", len(r.Compactions))
	}
	marked := 0
	for _, p := range r.Series {
		if p.Compacted {
			marked++
			if p.After >= p.Before {
				t.Errorf("call %d: compaction from %d to %d tokens", p.Call, p.Before, p.After)
			}
		}
	}
	if marked != len(r.Compactions) {
		t.Errorf("%d points marked for %d compactions", marked, len(r.Compactions))
	}
	prevCut := 0
	for _, c := range r.Compactions {
		if c.Cut <= prevCut || c.Cut >= len(msgs) {
			t.Fatalf("compaction at call %d: cut %d after %d", c.Call, c.Cut, prevCut)
		}
		prevCut = c.Cut
		read, modified := filesBefore(msgs, c.Cut)
		if c.Recall.Read != read || c.Recall.Modified != modified {
			t.Errorf("call %d, cut %d: recall over %d read and %d modified files, want %d and %d", c.Call, c.Cut, c.Recall.Read, c.Recall.Modified, read, modified)
		}
		// The strategy names nothing: the host's verification lists them.
		if c.Recall.ModifiedNamed != c.Recall.Modified || c.Recall.ReadNamed != c.Recall.Read {
			t.Errorf("call %d: recall %+v", c.Call, c.Recall)
		}
		if !c.RequestFolded || !c.LatestRetained {
			t.Errorf("call %d: request folded %v, latest retained %v", c.Call, c.RequestFolded, c.LatestRetained)
		}
		if c.TokensAfter >= c.TokensBefore || c.DurationMillis < c.HostMillis {
			t.Errorf("call %d: tokens %d→%d, duration %.3f ms, host %.3f ms", c.Call, c.TokensBefore, c.TokensAfter, c.DurationMillis, c.HostMillis)
		}
	}
	if r.RequestsFolded != len(r.Compactions) || r.LatestRetained != len(r.Compactions) {
		t.Errorf("requests folded %d, latest retained %d, of %d compactions", r.RequestsFolded, r.LatestRetained, len(r.Compactions))
	}
	if r.Compression <= 1 || r.PeakHeapBytes == 0 || r.EngineMillis.N != len(r.Compactions) {
		t.Errorf("compression %.2f, peak heap %d, engine samples %d", r.Compression, r.PeakHeapBytes, r.EngineMillis.N)
	}
}

func TestReplayFlagsAnOrphan(t *testing.T) {
	msgs := []abi.Message{
		{ID: "u", Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "go"}}},
		{ID: "a", Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockText, Text: "thinking"}}},
		{ID: "r", Role: abi.RoleUser, Content: []abi.Block{result("t9", "a result whose call is nowhere")}},
	}
	r := replay(ctx, replayConfig{session: &formats.Session{Messages: msgs}, name: "orphan", window: 32000, strategy: "forgetful", impl: forgetful})
	if r.Gates != 2 || r.ValidGates != 1 {
		t.Fatalf("gates %d, valid %d; want the gate after the trailing result to fail", r.Gates, r.ValidGates)
	}
	if len(r.Invalid) != 1 || !strings.Contains(r.Invalid[0], "call 1") || !strings.Contains(r.Invalid[0], "has no tool_use") {
		t.Errorf("invalid: %q", r.Invalid)
	}
}

func TestReplayFeedsUsage(t *testing.T) {
	msgs := workSession(2)
	// The report for message 1 says the messages cost twenty times the
	// window: the engine must see the overflow.
	tr := usageTranslation{calls: map[int]agentCall{1: {recorded: 20 * 8000, estimate: 10}}}
	msgs[1].Usage = &abi.Usage{InputTokens: 20 * 8000}
	r := replay(ctx, replayConfig{session: &formats.Session{Messages: msgs}, name: "usage", window: 8000, strategy: "forgetful", impl: forgetful, usage: tr})
	if r.Overflows != 1 {
		t.Errorf("overflows %d, want 1", r.Overflows)
	}
}

func TestAccounting(t *testing.T) {
	const overhead = 1000
	msgs := workSession(4)
	// The agent compacted before message 12: its summary replaced the
	// first two turns.
	ac := formats.AgentCompaction{ID: "c1", Summary: "Two steps were done.", FirstKept: 12}
	counter, err := host.New(host.Config{ContextWindow: 1 << 20, Tokenizer: "chars"})
	if err != nil {
		t.Fatal(err)
	}
	// Usage as a provider whose tokens are chars/4 would report it, with
	// the overhead on top.
	for i := range msgs {
		if msgs[i].Role != abi.RoleAssistant {
			continue
		}
		s := counter.NewSession()
		if i >= ac.FirstKept {
			s.Append(agentContext(ac)...)
			s.Append(msgs[ac.FirstKept:i]...)
		} else {
			s.Append(msgs[:i]...)
		}
		msgs[i].Usage = &abi.Usage{InputTokens: 10, CacheReadTokens: s.ContextTokens() + overhead - 10}
	}
	acc, tr := account(ctx, &formats.Session{Messages: msgs, AgentCompactions: []formats.AgentCompaction{ac}}, "work")
	if acc.Reports != 12 || len(acc.Calls) != 12 || acc.Overhead != overhead || tr.overhead != overhead {
		t.Fatalf("reports %d, calls %d, overhead %d (translation %d)", acc.Reports, len(acc.Calls), acc.Overhead, tr.overhead)
	}
	for _, c := range acc.Calls {
		if c.Chars+overhead != c.Recorded {
			t.Errorf("report %d (message %d): chars %d + %d != recorded %d: the agent's context is not followed", c.Report, c.Message, c.Chars, overhead, c.Recorded)
		}
	}
	if acc.CalibratedOverhead.All > 1e-9 || acc.CalibratedOverhead.N != 11 {
		t.Errorf("overhead declared: error %.3f%% over %d reports, want 0 over 11", acc.CalibratedOverhead.All, acc.CalibratedOverhead.N)
	}
	if acc.Chars.All <= 0 || acc.Calibrated.AfterThree >= acc.Chars.AfterThree {
		t.Errorf("chars/4 error %.1f%%, calibrated after three %.1f%%: calibration must help", acc.Chars.All, acc.Calibrated.AfterThree)
	}
	if len(acc.baseline) != 12 || len(acc.recorded) != 12 || acc.recorded[0] != msgs[1].Usage.PromptTokens() {
		t.Errorf("baseline %d points, recorded %v", len(acc.baseline), acc.recorded)
	}
}

func TestCompareAgent(t *testing.T) {
	msgs := workSession(3)
	// The agent's summary names one of the two files edited before it.
	ac := formats.AgentCompaction{ID: "c1", Summary: "Step 1: port the parser change to w1.go. Edited /src/w1.go.", FirstKept: 12}
	s := &formats.Session{Messages: msgs, AgentCompactions: []formats.AgentCompaction{ac}}
	cmp := compareAgent(ctx, Options{}, s, "work", 0, 32000, map[string]host.Strategy{"forgetful": forgetful}, []string{"forgetful"})
	if cmp.Agent.Modified != 2 || cmp.Agent.ModifiedNamed != 1 || cmp.Agent.Read != 2 || cmp.Agent.ReadNamed != 0 {
		t.Errorf("agent recall %+v", cmp.Agent)
	}
	if !cmp.RequestFolded || !cmp.AgentRetained {
		t.Errorf("the agent's summary quotes the latest folded request: folded %v, retained %v", cmp.RequestFolded, cmp.AgentRetained)
	}
	if len(cmp.Ours) != 1 {
		t.Fatalf("ours: %+v", cmp.Ours)
	}
	o := cmp.Ours[0]
	if o.Err != "" || o.Folded != ac.FirstKept {
		t.Fatalf("ours folded %d messages (want %d): %s", o.Folded, ac.FirstKept, o.Err)
	}
	if o.Recall.ModifiedNamed != 2 || o.Recall.ReadNamed != 2 || !o.Retained {
		t.Errorf("the host completes a forgetful summary: %+v, retained %v", o.Recall, o.Retained)
	}
	if o.StrategyRecall.ModifiedNamed != 0 || o.StrategyRecall.Modified != 2 {
		t.Errorf("the strategy alone names nothing: %+v", o.StrategyRecall)
	}
}

func TestRunWritesTableJSONAndCharts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "work.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := formats.Write(f, formats.Canonical, workSession(30)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var progress strings.Builder
	rep, err := Run(ctx, Options{Sessions: []string{path}, Windows: []int{16000, 8000}, Strategies: []string{"truncate"}, InProcess: true, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || rep.Runs[1].Window != 8000 || len(rep.Runs[1].Compactions) == 0 {
		t.Fatalf("runs: %+v", rep.Runs)
	}
	if n := strings.Count(progress.String(), "\n"); n != 3 {
		t.Errorf("progress has %d lines, want one for the session and one per run:\n%s", n, progress.String())
	}
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"work", "truncate", "modified recall", "Targets:", "validity 100% at every window"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var js strings.Builder
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"compactions": [`) {
		t.Errorf("JSON lacks the compactions")
	}

	files, err := rep.WriteCharts(filepath.Join(dir, "charts"))
	if err != nil || len(files) != 1 || filepath.Base(files[0]) != "work.svg" {
		t.Fatalf("charts %v, %v", files, err)
	}
	svg, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	paths, markers := 0, 0
	dec := xml.NewDecoder(strings.NewReader(string(svg)))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v", err)
		}
		if el, ok := tok.(xml.StartElement); ok {
			switch el.Name.Local {
			case "path":
				paths++
			case "circle":
				for _, a := range el.Attr {
					if a.Name.Local == "fill" && a.Value == "white" {
						markers++
					}
				}
			}
		}
	}
	if want := len(rep.Runs[0].Compactions) + len(rep.Runs[1].Compactions); paths != 2 || markers != want {
		t.Errorf("chart has %d lines and %d compaction marks, want 2 and %d", paths, markers, want)
	}
}
