package eval

import (
	"fmt"
	"slices"
	"strings"
)

// Target figures.
const (
	targetReadRecall       = 0.95
	targetEngineMillis     = 20
	targetEngineWindow     = 200_000
	targetStrategy         = "structured"
	targetCalibrationError = 5.0 // percent, after three reports
)

// targets judges the report against the project's quality and speed goals.
func targets(rep *Report) []Target {
	var out []Target

	// Validity at every window.
	valid := Target{Name: "validity 100% at every window", Met: len(rep.Runs) > 0}
	var bad []string
	gates := 0
	for i := range rep.Runs {
		run := &rep.Runs[i]
		gates += run.Gates
		if run.Err != "" || run.ValidGates != run.Gates {
			valid.Met = false
			bad = append(bad, fmt.Sprintf("%s@%d/%s %d/%d", short(run.Session), run.Window, run.Strategy, run.ValidGates, run.Gates))
		}
	}
	valid.Detail = fmt.Sprintf("%d runs, %d gate calls", len(rep.Runs), gates)
	if len(bad) > 0 {
		valid.Detail += "; invalid or failed: " + strings.Join(bad, ", ")
	}
	out = append(out, valid)

	// Structured recall.
	var pooled Recall
	runs := 0
	for i := range rep.Runs {
		if rep.Runs[i].Strategy == targetStrategy {
			pooled.add(rep.Runs[i].Recall)
			runs++
		}
	}
	if runs > 0 {
		out = append(out,
			Target{Name: "structured modified-file recall 100%", Met: pooled.ModifiedNamed == pooled.Modified,
				Detail: fmt.Sprintf("%s over %d runs%s", pctOf(pooled.ModifiedNamed, pooled.Modified), runs, missing(pooled.MissingModified))},
			Target{Name: "structured read-file recall ≥ 95%", Met: pooled.ReadShare() >= targetReadRecall,
				Detail: fmt.Sprintf("%s over %d runs%s", pctOf(pooled.ReadNamed, pooled.Read), runs, missing(pooled.MissingRead))})
	}

	// Engine overhead on the largest session at 200k.
	if largest := largestSession(rep); largest != "" && slices.Contains(rep.Windows, targetEngineWindow) {
		t := Target{Name: fmt.Sprintf("engine overhead ≤ %d ms per compaction, %s at 200k", targetEngineMillis, short(largest)), Met: true}
		var parts []string
		measured := false
		for i := range rep.Runs {
			run := &rep.Runs[i]
			if run.Session != largest || run.Window != targetEngineWindow || run.EngineMillis.N == 0 {
				continue
			}
			measured = true
			parts = append(parts, fmt.Sprintf("%s mean %.1f ms (host part %.2f ms), max %.1f ms over %d", run.Strategy, run.EngineMillis.Mean, run.HostMillis.Mean, run.EngineMillis.Max, run.EngineMillis.N))
			if run.EngineMillis.Mean > targetEngineMillis {
				t.Met = false
			}
		}
		if !measured {
			t.Met, t.Detail = false, "no compaction at this window: not measured"
		} else {
			t.Detail = strings.Join(parts, "; ") + " (mean decides)"
		}
		out = append(out, t)
	}

	// Calibration after three reports.
	if len(rep.Accounting) > 0 {
		t := Target{Name: fmt.Sprintf("calibrated estimate within %.0f%% of recorded usage after three reports", targetCalibrationError), Met: true}
		var parts []string
		for _, a := range rep.Accounting {
			if a.CalibratedOverhead.NAfter == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %.1f%% declared / %.1f%% undeclared", short(a.Session), a.CalibratedOverhead.AfterThree, a.Calibrated.AfterThree))
			if a.CalibratedOverhead.AfterThree > targetCalibrationError {
				t.Met = false
			}
		}
		t.Detail = strings.Join(parts, "; ") + " (overhead declared decides)"
		out = append(out, t)
	}
	return out
}

func missing(files []string) string {
	if len(files) == 0 {
		return ""
	}
	if len(files) > 5 {
		files = append(files[:5:5], "…")
	}
	return "; not named: " + strings.Join(files, ", ")
}

// notes say what the session files do not contain.
func notes(rep *Report) []string {
	out := []string{
		"The transcripts hold the conversation, not the system prompt or the tool schemas the agent sent with every call, so raw estimates of the messages run low against recorded usage; the accounting table's overhead column is that gap at the first report, and calibration (a factor) or a declared overhead is what absorbs it.",
		"Replays declare no overhead (Request is empty): they measure the conversation under each window. Recorded usage is fed less that first-report overhead, scaled to the context the replay sent; after an agent's own compaction, what a report counts beyond the messages the file holds is taken for hidden content (see the package documentation).",
	}
	var none []string
	for _, s := range rep.Sessions {
		if s.Err == "" && s.UsageReports == 0 {
			none = append(none, fmt.Sprintf("%s (%s)", short(s.Name), s.Format))
		}
	}
	if len(none) > 0 {
		out = append(out, "No usage recorded, so no accounting and no calibration in the replay: "+strings.Join(none, ", ")+".")
	}
	for _, c := range rep.AgentComparisons {
		if c.AgentText == "replacement history" {
			out = append(out, fmt.Sprintf("%s: the agent's own summary is encrypted or empty in the file; its side of the comparison is the replacement history it kept, and its context after compaction is estimated without the summary.", short(c.Session)))
			break
		}
	}
	for _, s := range rep.Sessions {
		if s.Format == "codex" {
			out = append(out, "Codex reasoning items are stored encrypted (\"REDACTED\") and are not in the messages, though the agent sent them back to the model: its estimates miss them.")
			break
		}
	}
	if len(rep.Windows) > 0 {
		smallest := slices.Min(rep.Windows)
		var heavy []string
		for _, s := range rep.Sessions {
			if s.Err == "" && s.PinnedTokens > smallest/4 {
				heavy = append(heavy, fmt.Sprintf("%s %s", short(s.Name), kilo(s.PinnedTokens)))
			}
		}
		if len(heavy) > 0 {
			out = append(out, fmt.Sprintf("Pinned messages (system prompts the readers mark pinned) are never folded; where they take much of the %s window, little is left to fold beside the kept tail, so the gate compacts only once enough history can be folded and the emergency path (which keeps fewer messages) takes more of the compactions: %s tokens pinned.", kilo(smallest), strings.Join(heavy, ", ")))
		}
	}
	var floored []string
	for i := range rep.Runs {
		if n := rep.Runs[i].UncalibratedAfter; n > 0 {
			floored = append(floored, fmt.Sprintf("%s@%d/%s %d", short(rep.Runs[i].Session), rep.Runs[i].Window, rep.Runs[i].Strategy, n))
		}
	}
	if len(floored) > 0 {
		out = append(out, "The engine's calibrated estimate came out as 0 tokens after these compactions though the context held messages (a fit with a negative offset); their tokens after are the chars/4 estimate: "+strings.Join(floored, ", ")+".")
	}
	if !rep.Offline {
		out = append(out, "Engine time excludes the time strategies waited for the model.")
	} else {
		out = append(out, "Offline: no model was called; engine time is the whole compaction (CompactionEvent.Duration), strategy included.")
	}
	return out
}
