// Package structured is the built-in strategy that writes a summary in
// seven fixed sections. With a model it asks the host for a completion and checks
// the reply; without one it fills the same sections from the transcript.
package structured

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/plugins/internal/digest"
	sdk "github.com/compact-host/compact-host/sdk/core"
)

// The seven sections, in the order every structured summary has them.
const (
	ActiveTask     = "Active Task"
	NextStep       = "Next Step"
	KeyDecisions   = "Key Decisions & Rationale"
	FilesArtifacts = "Files & Artifacts"
	Constraints    = "Constraints & Requirements"
	PendingItems   = "Pending Items"
	Narrative      = "Session Narrative"
)

// Sections lists the section titles in order.
var Sections = []string{ActiveTask, NextStep, KeyDecisions, FilesArtifacts, Constraints, PendingItems, Narrative}

// Name is the plugin's name.
const Name = "structured"

// New returns the structured strategy plugin.
func New() *sdk.Plugin {
	return &sdk.Plugin{
		Name:        Name,
		Version:     "1.0.0",
		Description: "Seven-section summary (task, next step, decisions, files, constraints, pending, narrative); deterministic offline mode without a model.",
		Strategy:    Strategy{},
	}
}

// Strategy implements sdk.Strategy. The zero value is ready to use and
// safe for concurrent calls.
type Strategy struct{}

var _ sdk.Strategy = Strategy{}

// Summarize implements sdk.Strategy. It returns the host's model error
// when a model is configured but fails, so that the host can fall back;
// a host without a model (abi.CodeNoModel) gets the offline summary.
func (Strategy) Summarize(ctx context.Context, host sdk.Host, req *abi.SummarizeRequest) (*abi.SummarizeResponse, error) {
	if err := validate(req); err != nil {
		return nil, err
	}
	f := digest.Gather(req)
	if req.ModelAvailable {
		summary, err := withModel(ctx, host, req, f)
		if err == nil {
			return &abi.SummarizeResponse{Summary: summary}, nil
		}
		if !isNoModel(err) {
			return nil, err
		}
		host.Log(slog.LevelDebug, "structured: host has no model, summarizing offline")
	}
	d := offlineDoc(f, req.Focus, req.TargetTokens)
	return &abi.SummarizeResponse{Summary: digest.FitDoc(ctx, d, d.Room(req.TargetTokens), counter(host)), Offline: true}, nil
}

func validate(req *abi.SummarizeRequest) error {
	switch req.Kind {
	case abi.FoldHistory, abi.FoldTurnPrefix, "":
		return nil
	}
	return abi.Errorf(abi.CodeInvalidRequest, "structured: unknown summary kind %q", req.Kind)
}

func isNoModel(err error) bool {
	var e *abi.Error
	return errors.As(err, &e) && e.Code == abi.CodeNoModel
}

// counter asks the host to count tokens, falling back to the estimate.
func counter(host sdk.Host) func(ctx context.Context, s string) (int, error) {
	if host == nil {
		return nil
	}
	return host.CountTokens
}

// Prompt limits. The transcript is rendered to at most maxTranscriptBytes
// (about 100K tokens); a model that refuses the prompt as too large gets
// one half as long, twice at most.
const (
	maxTranscriptBytes = 400_000
	minReplyTokens     = 1024
)

// withModel asks the model for the six sections, repairs a reply that
// misses some with one more call, and fills what is still missing from the
// offline digest.
func withModel(ctx context.Context, host sdk.Host, req *abi.SummarizeRequest, f *digest.Facts) (string, error) {
	budget := maxTranscriptBytes
	var prompt string
	var resp *abi.CompleteResponse
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		prompt = userPrompt(req, f, budget)
		resp, err = host.Complete(ctx, &abi.CompleteRequest{
			System:    systemPrompt(req),
			Messages:  []abi.Message{textMessage(abi.RoleUser, prompt)},
			MaxTokens: replyTokens(req.TargetTokens),
		})
		var e *abi.Error
		if errors.As(err, &e) && e.Code == abi.CodeTooLarge {
			budget /= 2
			continue
		}
		break
	}
	if err != nil {
		return "", err
	}
	reply := resp.Text
	if missing := missingSections(reply); len(missing) > 0 {
		host.Log(slog.LevelDebug, fmt.Sprintf("structured: reply lacks %s; asking once more", strings.Join(missing, ", ")))
		repaired, err := host.Complete(ctx, &abi.CompleteRequest{
			System: systemPrompt(req),
			Messages: []abi.Message{
				textMessage(abi.RoleUser, prompt),
				textMessage(abi.RoleAssistant, reply),
				textMessage(abi.RoleUser, repairPrompt(missing)),
			},
			MaxTokens: replyTokens(req.TargetTokens),
		})
		switch {
		case err == nil:
			if len(missingSections(repaired.Text)) < len(missing) {
				reply = repaired.Text
			}
		case ctx.Err() != nil:
			return "", ctx.Err()
		default:
			host.Log(slog.LevelWarn, "structured: repair call failed, filling the missing sections offline: "+err.Error())
		}
	}
	d := fromReply(reply, offlineDoc(f, req.Focus, req.TargetTokens), f.Files.Modified)
	return digest.FitDoc(ctx, d, req.TargetTokens, counter(host)), nil
}

func replyTokens(target int) int {
	if target <= 0 {
		return 4096
	}
	return max(target*3/2, minReplyTokens)
}

func textMessage(role, text string) abi.Message {
	return abi.Message{Role: role, Content: []abi.Block{{Type: abi.BlockText, Text: text}}}
}

// missingSections lists the sections reply lacks, or holds out of order.
func missingSections(reply string) []string {
	secs := digest.ParseSections(reply)
	var missing []string
	next := 0
	for _, title := range Sections {
		found := false
		for i := next; i < len(secs); i++ {
			if digest.TitleKey(secs[i].Title) == digest.TitleKey(title) {
				found, next = true, i+1
				break
			}
		}
		if !found {
			missing = append(missing, title)
		}
	}
	return missing
}

// fromReply builds the summary from the model's sections, in the fixed
// order. Sections still missing take the offline digest's; a section the
// model added is kept under the one before it; text before the first
// heading is dropped. A modified file the reply does not name is listed.
func fromReply(reply string, offline *digest.Doc, modified []string) *digest.Doc {
	bodies := map[string][]string{}
	last := ""
	for _, s := range digest.ParseSections(reply) {
		title := canonical(s.Title)
		switch {
		case title != "":
			last = title
			bodies[title] = append(bodies[title], digest.Lines(s.Body)...)
		case s.Title != "" && last != "":
			bodies[last] = append(bodies[last], "**"+s.Title+"**")
			bodies[last] = append(bodies[last], digest.Lines(s.Body)...)
		}
	}
	d := &digest.Doc{}
	for i, title := range Sections {
		lines, ok := bodies[title]
		if !ok || len(lines) == 0 {
			d.Parts = append(d.Parts, offline.Parts[i])
			continue
		}
		p := digest.Part{Title: title, Omitted: "(%d lines left out to fit the size target.)"}
		keep := keepStated
		switch title {
		case ActiveTask, FilesArtifacts:
			keep = digest.Never
		case Narrative:
			keep = keepNarrative
		}
		for _, l := range lines {
			p.Items = append(p.Items, digest.Item{Text: l, Keep: keep})
		}
		d.Parts = append(d.Parts, p)
	}
	text := d.Render()
	for _, m := range modified {
		if !strings.Contains(text, m) {
			d.Parts[3].Items = append(d.Parts[3].Items, digest.Item{Text: "- `" + m + "` (modified)", Keep: digest.Never, Header: "Also modified, per the host's record:"})
		}
	}
	return d
}

func canonical(title string) string {
	for _, t := range Sections {
		if digest.TitleKey(t) == digest.TitleKey(title) {
			return t
		}
	}
	return ""
}
