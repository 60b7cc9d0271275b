package eval

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/cost"
)

// PolicyProbes is a policy's probe score on one session or in total: the
// probes answered by the context the policy leaves at each probe point.
type PolicyProbes struct {
	Probes   int     `json:"probes"`
	Answered int     `json:"answered"`
	Score    float64 `json:"score"`
	// Compactions counts the compactions the engine made before the
	// last probe point.
	Compactions int `json:"compactions"`
}

func (p *PolicyProbes) add(o PolicyProbes) {
	p.Probes += o.Probes
	p.Answered += o.Answered
	p.Compactions += o.Compactions
	if p.Probes > 0 {
		p.Score = float64(p.Answered) / float64(p.Probes)
	}
}

// probeEngineConfig is the engine of a policy's probe replay; ok is false
// for a policy the engine does not run (agent: the agent's own
// compactions).
func probeEngineConfig(policy, model string, window, maxOutput int, ttl time.Duration, coldShare float64) (host.Config, bool) {
	cfg := host.Config{Model: model, ContextWindow: window, MaxOutputTokens: maxOutput, Strategy: targetStrategy,
		Fallbacks: []string{}, CacheTTL: ttl}
	switch policy {
	case PolicyThreshold:
		cfg.Policy = host.PolicyThreshold
	case PolicyCacheAware:
		cfg.Policy, cfg.ColdShare = host.PolicyCacheAware, coldShare
	case PolicyNone:
		// Compacting only what would overflow: the gate at 99% of the
		// budget, no reserve.
		cfg.CompactThreshold, cfg.OverheadReserve, cfg.EmergencyThreshold = 0.99, -1, 1
	default:
		return cfg, false
	}
	return cfg, true
}

// probePolicy replays a session's messages through an engine of the
// policy with the offline structured strategy, a gate before each model
// call as the agent's would be, and scores the probes of each point on
// what the model sees then of the messages before it: the summaries the
// policy made where it compacted and what it kept verbatim (pinned
// messages aside, as in RunProbes). Each call takes the time of the
// recorded request at the same share of the session, so the cache-aware
// policy sees the session's pauses and growth; overhead is what every
// request carried beside the messages (the agent's system prompt and
// tools).
func probePolicy(ctx context.Context, strat host.Strategy, cfg host.Config, msgs []abi.Message, set *ProbeSet, times []time.Time, overhead int) (PolicyProbes, error) {
	var out PolicyProbes
	eng, err := host.New(cfg, host.WithStrategy(targetStrategy, strat), host.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return out, err
	}
	byAt := map[int][]*ProbePoint{}
	last := 0
	for i := range set.Points {
		p := &set.Points[i]
		byAt[p.At] = append(byAt[p.At], p)
		last = max(last, p.At)
	}
	gates := map[int]bool{}
	for _, g := range gatePoints(msgs) {
		gates[g] = true
	}
	calls := len(gates)
	sess := eng.NewSession()
	defer sess.Close()
	var (
		g         cost.Growth
		call      int
		prevAt    time.Time
		prevSize  int
		compacted bool
	)
	score := func(at int) {
		var seen []abi.Message
		for _, m := range sess.Context() {
			if !m.Pinned {
				seen = append(seen, m)
			}
		}
		text := ContextText(seen)
		for _, p := range byAt[at] {
			ps := scorePoint(ProbePointScore{}, p, text)
			for _, r := range ps.Probes {
				out.Probes++
				if r.Answered {
					out.Answered++
				}
			}
		}
	}
	for i := 0; i <= last && i <= len(msgs); i++ {
		if gates[i] {
			at := time.Time{}
			if len(times) > 0 {
				at = times[min(len(times)-1, call*len(times)/max(calls, 1))]
			}
			size := sess.ContextTokens() + overhead
			cold := false
			if call > 0 && !at.IsZero() && !prevAt.IsZero() {
				gap := at.Sub(prevAt)
				cold = gap > cfg.CacheTTL
				if !compacted {
					g.Observe(gap, cfg.CacheTTL, size-prevSize)
				}
			}
			before := len(sess.Compactions())
			if _, err := eng.EnsureFits(ctx, sess, host.Request{ToolSchemaTokens: overhead, CacheCold: cold, Growth: g}); err != nil {
				return out, fmt.Errorf("call %d: %w", call, err)
			}
			compacted = len(sess.Compactions()) > before
			prevAt, prevSize = at, sess.ContextTokens()+overhead
			call++
		}
		if _, ok := byAt[i]; ok {
			score(i)
		}
		if i == len(msgs) {
			break
		}
		m := msgs[i]
		// The recorded usage counts what the messages do not hold (the
		// overhead, sub-agents' calls): the engine is not calibrated by it.
		m.Usage = nil
		if err := sess.Append(m); err != nil {
			return out, fmt.Errorf("message %d: %w", i, err)
		}
	}
	out.Compactions = len(sess.Compactions())
	if out.Probes > 0 {
		out.Score = float64(out.Answered) / float64(out.Probes)
	}
	return out, nil
}

// probeSetFor finds the probe set of the session file named name.
func probeSetFor(sets []*ProbeSet, path string) *ProbeSet {
	for _, s := range sets {
		if s.Session == filepath.Base(path) {
			return s
		}
	}
	return nil
}

// probeInputs are what a session's probe replays need beside its
// messages: the main conversation's request times and the overhead its
// first request carried beyond the messages before it.
func probeInputs(msgs []abi.Message, reqs []cost.Request, model string) (times []time.Time, overhead int) {
	var first *cost.Request
	for i := range reqs {
		if reqs[i].Thread != "" {
			continue
		}
		if first == nil {
			first = &reqs[i]
		}
		times = append(times, reqs[i].Time)
	}
	gates := gatePoints(msgs)
	if first == nil || len(gates) == 0 {
		return times, 0
	}
	eng, err := host.New(host.Config{Model: model, ContextWindow: host.MaxContextWindow})
	if err != nil {
		return times, 0
	}
	sess := eng.NewSession()
	defer sess.Close()
	for _, m := range msgs[:gates[0]] {
		m.Usage = nil
		if sess.Append(m) != nil {
			return times, 0
		}
	}
	return times, max(0, first.PromptTokens()-sess.ContextTokens())
}

// prober scores the policies of eval --cost on the probe sets.
type prober struct {
	sets  []*ProbeSet
	src   *source
	strat host.Strategy
}

func newProber(probes string) (*prober, error) {
	sets, err := LoadProbes(probes)
	if err != nil {
		return nil, err
	}
	src, err := newSource(context.Background(), Options{})
	if err != nil {
		return nil, err
	}
	strat, _, err := src.strategy(context.Background(), targetStrategy)
	if err != nil {
		src.close()
		return nil, fmt.Errorf("eval: strategy %q: %w", targetStrategy, err)
	}
	return &prober{sets: sets, src: src, strat: strat}, nil
}

func (p *prober) close() { p.src.close() }

// score fills the probe score of each policy of cs, the session at path
// whose recorded requests are reqs, at window; a session without a probe
// set is left as it is.
func (p *prober) score(cs *CostSession, path string, reqs []cost.Request, model string, window int, opts CostOptions, ttl time.Duration) error {
	set := probeSetFor(p.sets, path)
	if set == nil {
		return nil
	}
	sess, _, err := loadSession(path)
	if err != nil {
		return err
	}
	if err := set.Resolve(sess.Messages); err != nil {
		return err
	}
	times, overhead := probeInputs(sess.Messages, reqs, model)
	for i := range cs.Policies {
		pc := &cs.Policies[i]
		cfg, ok := probeEngineConfig(pc.Policy, model, window, opts.MaxOutputTokens, ttl, opts.ColdShare)
		if !ok {
			continue
		}
		pp, err := probePolicy(context.Background(), p.strat, cfg, sess.Messages, set, times, overhead)
		if err != nil {
			return fmt.Errorf("eval: %s under %s: %w", cs.Session, pc.Policy, err)
		}
		pc.Probe = &pp
	}
	return nil
}
