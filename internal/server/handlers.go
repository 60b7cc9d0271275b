package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/internal/sessionio"
	"github.com/compact-host/compact-host/internal/suggest"
	"github.com/compact-host/compact-host/internal/tenant"
)

// events collects what one request's engine reports, and its model
// calls.
type events struct {
	mu        sync.Mutex
	fallbacks []string
	meter     *Meter // nil when the server runs offline
	// public words a plugin's failure for the client (Server.public).
	public func(string) string
}

func (ev *events) watch(e *host.Engine) {
	e.Subscribe(func(x host.Event) {
		ev.mu.Lock()
		defer ev.mu.Unlock()
		if x, ok := x.(*host.FallbackEvent); ok {
			ev.fallbacks = append(ev.fallbacks, ev.public(fmt.Sprintf("%s → %s: %v", x.From, x.To, x.Err)))
		}
	})
}

func (ev *events) result() ([]string, ModelStats) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return ev.fallbacks, ev.meter.Stats()
}

// compact serves POST /v1/compact: the CLI's compact command over HTTP.
func (s *Server) compact(w http.ResponseWriter, r *http.Request, body []byte) *apiError {
	began := time.Now()
	var req CompactRequest
	if aerr := decode(body, &req); aerr != nil {
		return aerr
	}
	o := req.Options
	switch {
	case o.Threshold < 0 || o.Threshold > 1:
		return badRequest("options.threshold %g: want a share between 0 and 1", o.Threshold)
	case len(o.Focus) > maxFocusBytes:
		return badRequest("options.focus is %d bytes; at most %d", len(o.Focus), maxFocusBytes)
	}
	ctx := r.Context()
	e, ev, in, aerr := s.open(ctx, o.EngineOptions, req.Session, req.Format, req.OutputFormat)
	if aerr != nil {
		return aerr
	}
	sess := in.Session
	defer sess.Close()

	b := e.Budget()
	rep := CompactReport{
		Format: in.Format, Messages: sess.Len(), Model: s.model(o.EngineOptions), ContextWindow: b.ContextWindow, Budget: b.Input,
		Tokenizer: e.Tokenizer(), SkippedRecords: in.Skipped, Repaired: in.Repaired, Warnings: in.Warnings,
	}
	res, err := sessionio.Compact(ctx, e, sess, sessionio.Options{Focus: o.Focus, RecallHint: o.RecallHint, Threshold: o.Threshold, DryRun: o.DryRun})
	if err != nil {
		return workError(ctx, "compacting", err)
	}
	rep.Action, rep.TokensBefore, rep.TokensAfter, rep.Fits = res.Action, res.TokensBefore, res.TokensAfter, res.Fits
	if res.Action == sessionio.ActionNone {
		rep.Threshold = o.Threshold
	}
	if res.Plan != nil {
		rep.Plan = PlanOf(*res.Plan)
	}
	if c := res.Compaction; c != nil {
		rep.Strategy, rep.Offline, rep.Folded = c.Strategy, c.Offline, c.MessagesFolded
	}
	if res.Action != sessionio.ActionPlan && res.Action != sessionio.ActionNone {
		rep.RequestedStrategy = firstOf(o.Strategy, s.opts.Config.Strategy, host.DefaultStrategy)
	}
	resp := CompactResponse{}
	if !o.DryRun {
		rep.OutputFormat = sessionio.OutputFormat(req.OutputFormat, in.Format)
		out, cx, kept, aerr := s.output(sess, in, rep.OutputFormat)
		if aerr != nil {
			return aerr
		}
		resp.Session, resp.Context, rep.Kept = out, cx, kept
	}
	rep.Fallbacks, rep.ModelStats = ev.result()
	rep.DurationMS = float64(time.Since(began).Microseconds()) / 1000
	resp.Report = rep
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// open is what /v1/compact and /v1/check do first: check the formats,
// build the request's engine, watch its events, and read the session.
func (s *Server) open(ctx context.Context, o EngineOptions, session json.RawMessage, format, outFormat string) (*host.Engine, *events, *input, *apiError) {
	if aerr := checkFormats(format, outFormat); aerr != nil {
		return nil, nil, nil, aerr
	}
	e, ev, aerr := s.requestEngine(ctx, o)
	if aerr != nil {
		return nil, nil, nil, aerr
	}
	in, aerr := readSession(e, session, format)
	if aerr != nil {
		return nil, nil, nil, aerr
	}
	return e, ev, in, nil
}

// requestEngine builds a request's engine, metered and watched.
func (s *Server) requestEngine(ctx context.Context, o EngineOptions) (*host.Engine, *events, *apiError) {
	ev := &events{public: s.public}
	// A nil *Meter in the interface would be a model that is not there.
	var model host.ModelClient
	if s.opts.Model != nil {
		ev.meter = NewMeter(s.opts.Model)
		// The engine lives for this request, its breaker too: the
		// tenant's breaker holds across its requests and sessions.
		t := callerIn(ctx).tenant
		model = tenant.Guard(ev.meter, s.breakers, t, func(cooldown time.Duration, err error) {
			s.log.Warn("summary calls failed repeatedly; this tenant's model-backed summaries are skipped for the cool-down",
				"tenant", t, "cooldown", cooldown, "err", err)
		})
	}
	e, aerr := s.engine(ctx, o, model)
	if aerr != nil {
		return nil, nil, aerr
	}
	ev.watch(e)
	return e, ev, nil
}

// output checks the session the engine left and renders it, whole and as
// the context to send. An invalid result is a bug of the engine: it is
// reported, never sent.
func (s *Server) output(sess *host.Session, in *input, format string) ([]byte, Context, int, *apiError) {
	msgs := sess.Context()
	if err := host.Validate(msgs, in.PendingTail); err != nil {
		s.log.Error("the engine produced an invalid session", "format", in.Format, "err", err)
		return nil, Context{}, 0, errorf(http.StatusInternalServerError, CodeInternal, "the result failed validation, so it was not sent: %v", err)
	}
	out, err := writeSession(sess, format)
	if err == nil {
		var cx Context
		cx, err = sendable(msgs, format, out)
		if err == nil {
			return out, cx, len(msgs), nil
		}
	}
	return nil, Context{}, 0, errorf(http.StatusInternalServerError, CodeInternal, "write the session as %s: %v", format, err)
}

// sendable is the context msgs make in format. For anthropic and openai
// it is taken from the request written (out), so that its messages keep
// the bytes the request keeps (signatures, cache_control, unknown
// fields); the session log has no such request, so canonical messages
// are encoded from msgs.
func sendable(msgs []abi.Message, format string, out json.RawMessage) (Context, error) {
	if format == formats.Canonical {
		b, err := json.Marshal(msgs)
		return Context{Messages: b}, err
	}
	var req struct {
		Messages json.RawMessage `json:"messages"`
		System   json.RawMessage `json:"system"`
	}
	if err := json.Unmarshal(out, &req); err != nil {
		return Context{}, err
	}
	if len(req.Messages) == 0 || req.Messages[0] != '[' {
		return Context{}, fmt.Errorf("the %s request has no messages array", format)
	}
	cx := Context{Messages: req.Messages}
	if format == formats.Anthropic && len(req.System) > 0 && string(req.System) != "null" {
		cx.System = req.System
	}
	return cx, nil
}

// model is the model a request's budget was sized for.
func (s *Server) model(o EngineOptions) string {
	if o.Model != "" {
		return o.Model
	}
	return s.opts.Config.Model
}

// check serves POST /v1/check: the gate, measuring or applied.
func (s *Server) check(w http.ResponseWriter, r *http.Request, body []byte) *apiError {
	var req CheckRequest
	if aerr := decode(body, &req); aerr != nil {
		return aerr
	}
	// Counts are in range once decoded (tokencount.Tokens).
	gr := req.Request
	ctx := r.Context()
	e, ev, in, aerr := s.open(ctx, req.Options, req.Session, req.Format, req.OutputFormat)
	if aerr != nil {
		return aerr
	}
	sess := in.Session
	defer sess.Close()

	b := e.Budget()
	tokens := sess.ContextTokens()
	overhead := int(gr.ToolSchemaTokens + gr.DynamicTokens)
	resp := CheckResponse{
		Format: in.Format, Messages: sess.Len(), Tokenizer: e.Tokenizer(),
		Budget: Budget{ContextWindow: b.ContextWindow, MaxOutputTokens: b.MaxOutputTokens, Input: b.Input,
			PruneAt: b.PruneAt, CompactAt: b.CompactAt, EmergencyAt: b.EmergencyAt},
		Tokens: tokens, Overhead: overhead, Total: tokens + overhead,
		Usage: float64(tokens+overhead) / float64(b.Input), Fits: tokens+overhead <= b.Input,
		Warnings: in.Warnings,
	}
	resp.Action = s.wouldDo(resp.Total, b)
	if req.Apply {
		d, err := e.EnsureFits(ctx, sess, host.Request{ToolSchemaTokens: int(gr.ToolSchemaTokens), DynamicTokens: int(gr.DynamicTokens)})
		if err != nil {
			return workError(ctx, "the gate", err)
		}
		resp.Decision = &Decision{Action: d.Action.String(), TokensBefore: d.TokensBefore, TokensAfter: d.TokensAfter,
			Budget: d.Budget, Usage: d.Usage(), Fits: d.Fits}
		resp.Fits = d.Fits
		resp.OutputFormat = sessionio.OutputFormat(req.OutputFormat, in.Format)
		out, cx, _, aerr := s.output(sess, in, resp.OutputFormat)
		if aerr != nil {
			return aerr
		}
		resp.Session, resp.Context = out, &cx
		var stats ModelStats
		resp.Fallbacks, stats = ev.result()
		resp.ModelStats = &stats
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// wouldDo is what the gate would do to a request of total tokens: below
// the prune threshold nothing; above it prune, then compact from the
// compaction point, the emergency path from its threshold.
func (s *Server) wouldDo(total int, b host.Budget) string {
	used, in := float64(total), float64(b.Input)
	switch {
	case used < b.PruneAt*in:
		return "none"
	case used < b.CompactAt*in || s.opts.Config.DisableCompaction:
		return "prune"
	case used < b.EmergencyAt*in:
		return "compact"
	}
	return "emergency"
}

// truncate serves POST /v1/truncate: one tool output capped by its
// category's truncator.
func (s *Server) truncate(w http.ResponseWriter, r *http.Request, body []byte) *apiError {
	var req TruncateRequest
	if aerr := decode(body, &req); aerr != nil {
		return aerr
	}
	if len(req.Tool) > maxNameBytes || len(req.Category) > maxNameBytes {
		return badRequest("tool and category are at most %d bytes", maxNameBytes)
	}
	ctx := r.Context()
	e, aerr := s.engine(ctx, EngineOptions{}, nil)
	if aerr != nil {
		return aerr
	}
	category := req.Category
	if category == "" {
		category = e.ToolCategory(req.Tool)
	} else if _, err := s.opts.Registry.Truncator(ctx, category); errors.Is(err, plugin.ErrNotFound) {
		// The engine would cut head and tail in its place, silently.
		names := CategoryNames(ctx, s.opts.Registry)
		return errorf(http.StatusBadRequest, CodeUnknownCategory, "category %q: no truncator handles it; the categories are %s%s",
			category, strings.Join(names, ", "), suggest.Hint(category, names))
	}
	in := []byte(req.Content)
	out := e.TruncateOutput(ctx, category, req.Tool, in, int(req.MaxTokens))
	writeJSON(w, http.StatusOK, TruncateResponse{
		Content: string(out), Category: category, Truncated: !bytes.Equal(in, out),
		BytesBefore: len(in), BytesAfter: len(out), TokensBefore: e.CountTokens(req.Content), TokensAfter: e.CountTokens(string(out)),
	})
	return nil
}

// pluginList is the registry's plugins, sorted by name, as a client may
// see them: a plugin's file by its name in the plugins directory, its
// error without the server's paths.
func (s *Server) pluginList(r *http.Request) []PluginInfo {
	list := PluginInfos(s.opts.Registry.List(r.Context()))
	for i := range list {
		if list[i].Path != "" {
			list[i].Path = filepath.Base(list[i].Path)
		}
		list[i].Error = s.public(list[i].Error)
	}
	return list
}

// PluginInfos turns registry entries into the rows /v1/plugins answers
// and `compact-host plugins list` prints, sorted by name.
func PluginInfos(entries []plugin.Entry) []PluginInfo {
	var out []PluginInfo
	for _, e := range entries {
		p := PluginInfo{Name: e.Name, Source: string(e.Source), Path: e.Path, Loaded: e.Loaded, Overridden: e.Overridden}
		if e.Loaded {
			p.Kinds, p.Categories, p.Version, p.Description = e.Info.Kinds, e.Info.Categories, e.Info.Version, e.Info.Description
			p.ABI = fmt.Sprintf("v%d.%d", e.Info.ABIMajor, e.Info.ABIMinor)
		}
		if e.Err != nil {
			p.Error = e.Err.Error()
		}
		out = append(out, p)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// plugins serves GET /v1/plugins.
func (s *Server) plugins(w http.ResponseWriter, r *http.Request, _ []byte) *apiError {
	list := s.pluginList(r)
	if list == nil {
		list = []PluginInfo{}
	}
	writeJSON(w, http.StatusOK, PluginsResponse{Dir: filepath.Base(s.opts.Registry.Dir()), Plugins: list})
	return nil
}

// health serves GET /healthz. It needs no token, so load balancers can
// probe it.
func (s *Server) health(w http.ResponseWriter, r *http.Request, _ []byte) *apiError {
	h := Health{Status: "ok", Version: s.opts.Version, ABI: abiVersion}
	for _, p := range s.pluginList(r) {
		if p.Error != "" {
			h.Broken++
		} else if p.Loaded {
			h.Plugins++
		}
	}
	writeJSON(w, http.StatusOK, h)
	return nil
}

// firstOf is the first non-empty string of ss.
func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
