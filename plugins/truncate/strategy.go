package truncate

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/plugins/internal/digest"
	sdk "github.com/compact-host/compact-host/sdk/core"
)

// DigestNote opens every digest.
const DigestNote = "_Digest of the folded messages, built without a model: the user's requests verbatim, tools, files and errors; nothing is interpreted._"

// Strategy implements sdk.Strategy with a model-free digest. It never
// calls the host's model and never fails: odd input gives a shorter digest.
type Strategy struct{}

var _ sdk.Strategy = Strategy{}

// Summarize implements sdk.Strategy.
func (Strategy) Summarize(ctx context.Context, host sdk.Host, req *abi.SummarizeRequest) (resp *abi.SummarizeResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			if host != nil {
				host.Log(slog.LevelError, fmt.Sprintf("truncate: digest failed (%v); returning the minimal digest", r))
			}
			resp, err = &abi.SummarizeResponse{Summary: minimal(req), Offline: true}, nil
		}
	}()
	var count func(context.Context, string) (int, error)
	if host != nil {
		count = host.CountTokens
	}
	return &abi.SummarizeResponse{Summary: digest.FitDoc(ctx, digestDoc(req), req.TargetTokens, count), Offline: true}, nil
}

// minimal is the digest of last resort: the request count and the latest
// request.
func minimal(req *abi.SummarizeRequest) string {
	s := DigestNote + "\n\n" + fmt.Sprintf("%d messages were folded.\n", len(req.Messages))
	if r, ok := digest.LatestRequest(req.Messages); ok {
		s += "\n## Latest Request\n" + digest.Clip(r.Text, 6000) + "\n"
	}
	return s
}

// Priorities for fitting: the previous summary's text goes first, then
// files only read, then older requests; the latest request and the
// modified files stay.
const (
	keepPrevious = 1
	keepRead     = 2
	keepOlder    = 3
	keepErrors   = 4
	keepTools    = 5
)

func digestDoc(req *abi.SummarizeRequest) *digest.Doc {
	msgs := req.Messages
	f := digest.Gather(req)
	reqs, calls, files := f.Requests, f.Calls, f.Files
	d := &digest.Doc{Preamble: DigestNote + fmt.Sprintf(" %d messages, %d tool calls.", len(msgs), len(calls))}

	rp := digest.Part{Title: "User Requests", Empty: "No user request in the folded messages.", Omitted: "(%d earlier requests left out to fit the size target.)"}
	for i, r := range reqs {
		keep, text := keepOlder, digest.Clip(r.Text, 2000)
		if i == len(reqs)-1 {
			keep, text = digest.Never, digest.Clip(r.Text, 6000)
		}
		rp.Items = append(rp.Items, digest.Item{Text: fmt.Sprintf("%d. %s", i+1, indent(text)), Keep: keep})
	}
	if f := strings.TrimSpace(req.Focus); f != "" {
		rp.Items = append(rp.Items, digest.Item{Text: "Focus asked for this summary: " + digest.OneLine(f), Keep: digest.Never})
	}

	tp := digest.Part{Title: "Tools Used", Empty: "No tool calls."}
	if len(calls) > 0 {
		tp.Items = []digest.Item{{Text: digest.FormatTools(digest.CountTools(calls)), Keep: keepTools}}
	}

	fp := digest.Part{Title: "Files", Empty: "No file operations.", Omitted: "(%d files read left out to fit the size target.)"}
	for _, f := range files.Modified {
		fp.Items = append(fp.Items, digest.Item{Text: "- `" + f + "`", Keep: digest.Never, Header: "Modified:"})
	}
	for _, f := range files.Read {
		fp.Items = append(fp.Items, digest.Item{Text: "- `" + f + "`", Keep: keepRead, Header: "Read:"})
	}

	ep := digest.Part{Title: "Errors", Empty: "No errors seen.", Omitted: "(%d errors left out to fit the size target.)"}
	errs := f.Errors
	if len(errs) > 5 {
		ep.Items = append(ep.Items, digest.Item{Text: fmt.Sprintf("%d errors in all; the last 5:", len(errs)), Keep: keepErrors})
	}
	for _, e := range digest.Last(errs, 5) {
		ep.Items = append(ep.Items, digest.Item{Text: fmt.Sprintf("- `%s`: %s", e.Call, strings.ReplaceAll(e.Text, "\n", " / ")), Keep: keepErrors})
	}
	d.Parts = []digest.Part{rp, tp, fp, ep}

	if prev := strings.TrimSpace(req.PreviousSummary); prev != "" {
		pp := digest.Part{Title: "Previous Summary", Omitted: "(%d lines of the previous summary left out to fit the size target.)"}
		for _, l := range digest.Lines(prev) {
			if strings.HasPrefix(l, "#") {
				l = "#" + l // one level down, under this heading
			}
			pp.Items = append(pp.Items, digest.Item{Text: l, Keep: keepPrevious})
		}
		// The oldest lines go first when fitting; keep the summary's
		// order but drop from its start.
		d.Parts = append(d.Parts, pp)
	}
	return d
}

// indent keeps a multi-line request inside its list item.
func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n   ") }
