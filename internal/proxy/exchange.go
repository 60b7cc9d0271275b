package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/catalog"
	"github.com/compact-host/compact-host/host/cost"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/overflow"
	"github.com/compact-host/compact-host/host/provider"
	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/internal/tenant"
)

// exchange is one messages request on its way through the proxy.
type exchange struct {
	p      *Proxy
	kind   string
	began  time.Time
	header http.Header
	path   string
	cred   credentials
	// geminiKey is the key a Gemini request sent as ?key=, for its
	// summary calls.
	geminiKey string
	// log hides this request's own secrets in every line, an upstream's
	// body quoted back included.
	log *slog.Logger

	raw   *rawRequest
	model string
	conv  string
	// rec is the stored compaction spliced into out, if any; spliced
	// counts the messages its replacement put in place of the folded ones.
	rec     *store.Record
	spliced int
	out     []byte
	// action is what happened, for the requests metric.
	action string

	// Built when the gate needs them.
	eng      *host.Engine
	sess     *host.Session
	replayed int // compactions in sess that came from rec
	cost     float64
	costBy   string
	// guard is this request's model client, once built; offline says
	// that summaries are made without a model (Options.Offline, or the
	// tenant's breaker open).
	guarded *tenant.GuardedModel
	offline bool
	// agentSummary is the sign by which the request is the agent's own
	// summary request ("" when it is not): it goes upstream whole, and is
	// folded only when it would not fit, never by the emergency path.
	agentSummary string
	// turn is this request in its conversation's cache state.
	turn *turn
}

// newExchange starts a messages request of kind on its way: its log
// hides the request's own credentials.
func (p *Proxy) newExchange(kind, path string, header http.Header, cred credentials) *exchange {
	return &exchange{p: p, kind: kind, began: time.Now(), header: header, path: path, cred: cred,
		log: slog.New(p.logs.WithKnown(cred.known...)).With("kind", kind)}
}

// Request actions.
const (
	actionForwarded = "forwarded"
	actionSpliced   = "spliced"
	actionCompacted = "compacted"
	actionFallback  = "fallback"
	actionUnparsed  = "unparsed"
	// actionChained is a Responses request on previous_response_id.
	actionChained = "previous_response_id"
	// actionAgentSummary is the agent's own summary request.
	actionAgentSummary = "agent_summary"
)

// conversationKey is the request's member that holds the conversation.
func (x *exchange) conversationKey() string {
	switch x.kind {
	case kindResponses:
		return "input"
	case KindGemini:
		return "contents"
	}
	return "messages"
}

// systemKey is the request's member that holds the system prompt.
func (x *exchange) systemKey() string {
	switch x.kind {
	case kindResponses:
		return "instructions"
	case KindGemini:
		return "systemInstruction"
	}
	return "system"
}

// providerKind is the provider whose API the request speaks, for the
// summary calls and the catalog: a Responses request's is OpenAI's.
func (x *exchange) providerKind() string {
	if x.kind == kindResponses {
		return KindOpenAI
	}
	return x.kind
}

// prepare decides what to send: the body unchanged, with a stored
// compaction spliced in, or with a new one. Whatever fails, out is a body
// no worse than the one that arrived.
func (x *exchange) prepare(ctx context.Context, body []byte) {
	x.out, x.action = body, actionForwarded
	x.offline = x.p.o.Offline
	if !x.offline && x.p.breakers.Open(x.cred.tenant, time.Now()) {
		// The tenant's summary calls failed again and again: this
		// request's compaction is made offline, and costs no wait.
		x.offline = true
		x.p.m.breakerSkipped.Inc()
	}
	raw, err := scanConversation(body, x.conversationKey())
	if err != nil {
		x.action = actionUnparsed
		x.log.Info("request not parsed; forwarded untouched", "reason", err.Error())
		return
	}
	x.raw = raw
	if m := raw.field("model"); len(m) > 0 {
		json.Unmarshal(m, &x.model)
	}
	if x.kind == KindGemini {
		// The Gemini API names the model in the path.
		x.model, _ = geminiModelOf(strings.TrimSuffix(x.path, "/"))
	}
	if x.kind == kindResponses {
		if id := bytes.TrimSpace(raw.field("previous_response_id")); len(id) > 0 && string(id) != "null" {
			// The provider holds the history before this request: there
			// is nothing here to fold, and cutting "input" would lose turns.
			x.action = actionChained
			x.log.Debug("chained on previous_response_id; the provider holds the history, forwarded untouched")
			return
		}
	}
	x.conv = x.conversationID()
	x.log = x.log.With("conversation", x.conv[:16], "model", x.model)
	x.turn = x.p.caches.begin(string(x.cred.tenant), x.conv, x.kind, x.model, body)
	if sign := x.agentSummarySign(); sign != "" {
		x.prepareAgentSummary(ctx, sign)
		return
	}
	if rec := x.latest(ctx); rec != nil {
		x.apply(rec)
	}
	if _, err := x.budget(); err != nil {
		x.p.warnOnce(x.model, "no window for this model; its requests are forwarded uncompacted", "model", x.model, "err", err)
		return
	}
	if x.underBound() {
		x.log.Debug("under the compaction point by the byte bound", "messages", len(raw.msgs), "bytes", len(x.out))
		return
	}
	if err := x.build(); err != nil {
		x.fallback("read", err)
		return
	}
	if !x.overCompactionPoint() {
		return
	}
	if err := x.compact(ctx, nil); err != nil {
		x.fallback(stage("compaction", err), err)
	}
}

// prepareAgentSummary decides what to send for the agent's own summary
// request: the request whole when it fits the window; when it does not,
// the stored compaction spliced in, or a new one made by the strategies.
func (x *exchange) prepareAgentSummary(ctx context.Context, sign string) {
	x.agentSummary, x.action = sign, actionAgentSummary
	x.log = x.log.With("agent_summary", sign)
	if _, err := x.budget(); err != nil {
		x.p.warnOnce(x.model, "no window for this model; its requests are forwarded uncompacted", "model", x.model, "err", err)
		return
	}
	if !x.underBound() {
		if err := x.build(); err != nil {
			x.fallback("read", err)
			return
		}
		if x.needsFolding() {
			if err := x.compact(ctx, nil); err != nil {
				x.fallback(stage("compaction", err), err)
			}
			return
		}
	}
	x.log.Info("the agent's own summary request forwarded whole", "messages", len(x.raw.msgs))
}

// needsFolding reports whether the request must shrink: past the
// compaction point, or for the agent's own summary request, past the
// window itself.
func (x *exchange) needsFolding() bool {
	if x.agentSummary == "" {
		return x.overCompactionPoint()
	}
	b := x.eng.Budget()
	used := x.sess.ContextTokens() + x.overhead().ToolSchemaTokens
	x.log.Debug("agent summary request size", "tokens", used, "budget", b.Input)
	return used > b.Input
}

// stage names what failed for the fallbacks metric: waiting for a lock is
// not a failed compaction.
func stage(what string, err error) string {
	if errors.Is(err, errLockWait) {
		return "lock wait"
	}
	return what
}

// fallback says that the request goes on without the compaction it needed.
func (x *exchange) fallback(reason string, err error) {
	x.action = actionFallback
	if x.rec != nil {
		reason += "; the stored compaction is still applied"
	}
	x.p.m.fallbacks.WithLabelValues(strings.SplitN(reason, ";", 2)[0]).Inc()
	x.log.Warn("compaction skipped; forwarding without it", "stage", reason, "err", err)
}

// conversationID identifies a conversation by what its requests repeat,
// within the request's tenant: the API kind, the model family (the name less a date suffix), the system
// prompt and the messages up to and including the first user message, as
// raw bytes. Two agents' sessions with the same system prompt differ in
// their first request; a side request of the same agent on another model
// (a title, a quick check) is another conversation.
func (x *exchange) conversationID() string {
	h := sha256.New()
	writePart := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	writePart([]byte(x.cred.tenant))
	writePart([]byte(x.kind))
	writePart([]byte(modelFamily(x.model)))
	writePart(x.raw.field(x.systemKey()))
	users := 0
	for i := range x.raw.msgs {
		m := x.raw.msg(i)
		writePart(m)
		var head struct {
			Role string `json:"role"`
		}
		if json.Unmarshal(m, &head) != nil || head.Role != "user" {
			continue
		}
		// A harness's user messages (Codex's AGENTS.md and environment
		// context) open every session in a directory alike; the user's
		// first request tells them apart. A few at most, so the ID stays
		// the same from the first request on.
		if users++; users == maxHarnessMessages || !harnessText(m) {
			break
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// maxHarnessMessages bounds the user messages a conversation's ID takes
// in before the user's first request.
const maxHarnessMessages = 4

// harnessText reports whether the user message raw holds only text an
// agent's harness writes (abi.RequestText finds no request in it).
func harnessText(raw []byte) bool {
	text, ok := userText(raw)
	if !ok {
		return false
	}
	_, request := abi.RequestText(abi.Message{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: text}}})
	return !request
}

// modelFamily drops a date suffix: claude-sonnet-4-5-20250929 and
// claude-sonnet-4-5 are one family, gpt-4o-2024-08-06 and gpt-4o too.
func modelFamily(m string) string {
	m = strings.ToLower(m)
	if i := strings.LastIndexByte(m, '-'); i > 0 && len(m)-i-1 == 8 && allDigits(m[i+1:]) {
		return m[:i]
	}
	if len(m) > 11 && m[len(m)-11] == '-' && m[len(m)-3] == '-' && m[len(m)-6] == '-' &&
		allDigits(m[len(m)-10:len(m)-6]+m[len(m)-5:len(m)-3]+m[len(m)-2:]) {
		return m[:len(m)-11]
	}
	return m
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// prefixHash is the content hash of the first n messages as sent: each
// message's raw bytes, length-prefixed so that no two splits collide.
func (x *exchange) prefixHash(n int) string {
	h := sha256.New()
	var l [8]byte
	for i := 0; i < n; i++ {
		m := x.raw.msg(i)
		binary.BigEndian.PutUint64(l[:], uint64(len(m)))
		h.Write(l[:])
		h.Write(m)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// recordKey keys a compaction by the prefix it folded and the settings
// that shaped its summary.
func (x *exchange) recordKey(prefixHash string) string {
	c := x.p.o.Config
	h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%d\x00%d\x00%s\x00%t", prefixHash, c.Strategy,
		x.compactionModel(), c.SummaryTokens, c.KeepRecentTokens, x.conv, x.offline))
	return hex.EncodeToString(h[:])
}

// latest is the conversation's newest compaction if it applies to this
// request: one store round trip, then a hash of the request's own prefix.
func (x *exchange) latest(ctx context.Context) *store.Record {
	sctx, cancel := context.WithTimeout(ctx, x.p.o.StoreTimeout)
	defer cancel()
	rec, err := x.p.o.Store.Latest(sctx, x.conv)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		x.p.m.storeErrors.Inc()
		x.log.Warn("compaction store unavailable; going on without it", "err", err)
		return nil
	}
	if !x.matches(rec) {
		x.log.Debug("the stored compaction does not match this request's prefix", "folded_count", rec.FoldedCount)
		return nil
	}
	return rec
}

// matches reports whether rec folds this request's first messages.
func (x *exchange) matches(rec *store.Record) bool {
	return rec != nil && rec.FoldedCount > 0 && rec.FoldedCount < len(x.raw.msgs) &&
		x.prefixHash(rec.FoldedCount) == rec.PrefixHash && x.hintAgrees(rec)
}

// apply splices rec into the request: everything outside messages and
// every kept message byte for byte, the folded prefix replaced by rec's
// replacement, the same bytes on every request.
func (x *exchange) apply(rec *store.Record) {
	inner := bytes.TrimSpace(rec.Replacement)
	if len(inner) < 2 || inner[0] != '[' || inner[len(inner)-1] != ']' {
		x.log.Warn("stored compaction has a malformed replacement; ignored", "key", rec.Key)
		return
	}
	inner = bytes.TrimSpace(inner[1 : len(inner)-1])
	b := x.raw.body
	first := x.raw.msgs[rec.FoldedCount].start
	out := make([]byte, 0, x.raw.array.start+1+len(inner)+1+len(b)-first)
	out = append(out, b[:x.raw.array.start+1]...)
	if len(inner) > 0 {
		out = append(out, inner...)
		out = append(out, ',')
	}
	out = append(out, b[first:]...)
	saved := (len(x.raw.body) - len(out)) / 4
	var repl []json.RawMessage
	json.Unmarshal(rec.Replacement, &repl)
	x.rec, x.out, x.spliced = rec, out, len(repl)
	if x.action == actionForwarded {
		x.action = actionSpliced
	}
	x.p.m.tokensSaved.WithLabelValues(x.kind).Add(float64(max(saved, 0)))
}

// config is the engine config of this request.
func (x *exchange) config() host.Config {
	c := x.p.o.Config
	if c.Model == "" {
		c.Model = x.model
	}
	if _, known := catalog.Lookup(c.Model); !known && c.ContextWindow == 0 {
		c.Model = "" // host.New then asks for a window, naming the flag below
	}
	if mt := x.maxTokens(); mt > 0 && c.MaxOutputTokens == 0 {
		c.MaxOutputTokens = mt
	}
	// Pruning rewrites kept tool results in place, which would change the
	// kept messages' bytes and the provider's cache with them.
	c.DisablePrune = true
	return c
}

// maxTokens is the reply size the request asks for.
func (x *exchange) maxTokens() int {
	if x.kind == KindGemini {
		var gc struct {
			MaxOutputTokens int `json:"maxOutputTokens"`
		}
		if v := x.raw.field("generationConfig"); v != nil && json.Unmarshal(v, &gc) == nil && gc.MaxOutputTokens > 0 {
			return gc.MaxOutputTokens
		}
		return 0
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		var n int
		if v := x.raw.field(k); v != nil && json.Unmarshal(v, &n) == nil && n > 0 {
			return n
		}
	}
	return 0
}

// budget is the share of tokens at which this request's engine compacts.
func (x *exchange) budget() (compactAt float64, err error) {
	c := x.config()
	e, err := host.New(c)
	if err != nil {
		return 0, x.configError(err)
	}
	b := e.Budget()
	return b.CompactAt * float64(b.Input), nil
}

func (x *exchange) configError(err error) error {
	if x.p.o.Config.ContextWindow == 0 {
		return fmt.Errorf("%w (model %q: set --context-window or --model for it)", err, x.model)
	}
	return err
}

// underBound reports, without decoding, that the request is certainly
// under the compaction point: chars/4 of the whole body, images at the
// engine's flat price, is above what the engine would count.
func (x *exchange) underBound() bool {
	if x.p.o.Config.Tokenizer != "chars" || x.turn != nil && x.turn.Cold {
		return false
	}
	at, err := x.budget()
	if err != nil {
		return false
	}
	images := bytes.Count(x.out, []byte(`"image`))
	return float64(len(x.out)/4+images*1600) < at
}

// build reads the conversation into an engine session: every message as
// sent, and the stored compaction, so a further compaction merges its
// summary instead of summarizing the summary.
func (x *exchange) build() error {
	format := formats.Anthropic
	switch x.kind {
	case KindOpenAI:
		format = formats.OpenAI
	case kindResponses:
		format = formats.Responses
	case KindGemini:
		format = formats.GeminiAPI
	}
	read, err := formats.Read(bytes.NewReader(x.raw.body), format)
	if err != nil {
		// A parse error quotes the input; the log gets where, not what.
		var pe *formats.ParseError
		if errors.As(err, &pe) {
			return fmt.Errorf("the request does not read as %s messages (offset %d)", format, pe.Offset)
		}
		return fmt.Errorf("the request does not read as %s messages", format)
	}
	if len(read.Repaired) > 0 {
		// Repaired messages no longer map one to one onto the request's.
		return fmt.Errorf("the conversation breaks the tool-call rules (%v)", read.Repaired)
	}
	eng, err := x.engine()
	if err != nil {
		return err
	}
	var log bytes.Buffer
	enc := json.NewEncoder(&log)
	enc.SetEscapeHTML(false)
	var through string
	folded := 0
	for i := range read.Messages {
		m := &read.Messages[i]
		ri := x.rawIndex(m.ID)
		if err := enc.Encode(host.Entry{Type: host.EntryMessage, Message: m}); err != nil {
			return err
		}
		if x.rec == nil || ri < 0 || ri >= x.rec.FoldedCount {
			continue
		}
		if !m.Pinned {
			folded++
		}
		next := len(x.raw.msgs)
		if i+1 < len(read.Messages) {
			next = x.rawIndex(read.Messages[i+1].ID)
		}
		if next >= x.rec.FoldedCount {
			if next != x.rec.FoldedCount {
				return fmt.Errorf("the stored compaction ends inside message %d", ri)
			}
			through = m.ID
			c := host.Compaction{ID: "c1", FoldedThrough: through, Summary: x.rec.Summary, Strategy: x.rec.Strategy,
				Offline: x.rec.Offline, TokensBefore: x.rec.TokensBefore, TokensAfter: x.rec.TokensAfter,
				MessagesFolded: folded, Time: x.rec.CreatedAt}
			if err := enc.Encode(host.Entry{Type: host.EntryCompaction, Compaction: &c}); err != nil {
				return err
			}
		}
	}
	sess, err := eng.ReadSession(&log, x.conv[:16])
	if err != nil {
		return err
	}
	x.eng, x.sess, x.replayed = eng, sess, len(sess.Compactions())
	return nil
}

// rawIndex maps a message ID the reader gave ("anthropic-7") to the index
// of the request message it came from; -1 for the system prompt.
func (x *exchange) rawIndex(id string) int {
	i := strings.LastIndexByte(id, '-')
	n, err := strconv.Atoi(id[i+1:])
	if err != nil || i < 0 {
		return -1
	}
	return n
}

// overhead is what the request carries beyond its messages: the tools.
func (x *exchange) overhead() host.Request {
	req := host.Request{ToolSchemaTokens: x.eng.CountTokens(string(x.raw.field("tools")))}
	if x.turn != nil {
		req.CacheCold, req.Growth = x.turn.Cold, x.turn.Growth
	}
	return req
}

// planOptions plan what the gate's compaction folds: the recent history it
// keeps is the policy's for the conversation's growth (Engine.KeepRecent).
func (x *exchange) planOptions() host.CompactOptions {
	return host.CompactOptions{KeepRecentTokens: x.eng.KeepRecent(x.sess, x.overhead())}
}

// overCompactionPoint reports whether the gate would compact.
func (x *exchange) overCompactionPoint() bool {
	return x.due() != ""
}

// due is the engine's policy on this request: why it compacts, or "".
func (x *exchange) due() cost.Reason {
	b := x.eng.Budget()
	req := x.overhead()
	used := x.sess.ContextTokens() + req.ToolSchemaTokens
	due := x.eng.Due(used, req.CacheCold)
	x.log.Debug("gate", "tokens", used, "budget", b.Input, "policy", b.Policy, "cache_cold", req.CacheCold, "due", due)
	return due
}

// engine builds this request's engine: the proxy's config sized for the
// request's model, its strategies, and a model client that asks the same
// upstream with the client's credentials.
func (x *exchange) engine() (*host.Engine, error) {
	c := x.config()
	opts := []host.Option{host.WithLogger(x.log)}
	if x.p.o.Registry != nil {
		opts = append(opts, host.WithPlugins(x.p.o.Registry))
	}
	if !x.offline {
		cm := x.compactionModel()
		if x.guarded == nil && x.kind == KindGemini {
			x.guarded = x.guard(x.newGeminiModel(cm))
		}
		if x.guarded == nil {
			kind := x.providerKind()
			if x.kind == kindResponses {
				// A Responses conversation's summary is asked of the
				// same API, which its upstream is known to serve.
				kind = provider.KindResponses
			}
			cl, err := provider.New(provider.Config{
				Kind: kind, BaseURL: x.providerBase(), Model: x.model, CompactionModel: cm,
				Timeout: x.p.o.ProviderTimeout, MaxRetries: x.p.o.ProviderMaxRetries,
				HTTPClient: &http.Client{Transport: &credentialTransport{base: x.p.o.Transport, header: x.header}},
			})
			if err != nil {
				return nil, err
			}
			x.guarded = x.guard(cl)
		}
		opts = append(opts, host.WithModel(x.guarded), host.WithPromptSummarizer(x.cachedSummary))
		if m, ok := catalog.Lookup(cm); ok && cm != c.Model && c.SummarizerBudget == 0 {
			c.SummarizerBudget = m.InputBudget(0)
		}
	}
	opts = append(opts, x.p.o.EngineOptions...)
	e, err := host.New(c, opts...)
	if err != nil {
		return nil, x.configError(err)
	}
	e.Subscribe(func(ev host.Event) {
		if ce, ok := ev.(*host.CompactionEvent); ok {
			x.cost += ce.CostUSD
		}
	})
	return e, nil
}

// catalogProvider is the name the catalog files each API's models under:
// the Gemini API's are Google's.
var catalogProvider = map[string]string{KindAnthropic: "anthropic", KindOpenAI: "openai", KindGemini: "google"}

// compactionModel is the model summaries are asked of.
func (x *exchange) compactionModel() string {
	if x.p.o.CompactionModel != "" {
		return x.p.o.CompactionModel
	}
	m, ok := catalog.Lookup(x.model)
	if !ok || m.Provider != catalogProvider[x.providerKind()] {
		return x.model
	}
	if cm := catalog.SummaryModel(m); cm != m.ID {
		return cm
	}
	return x.model
}

// providerBase is the upstream address the SDKs need for the summary
// calls: the upstream plus what precedes the endpoint in this request's
// path (/v1 for OpenAI, whose SDK expects it in the base URL).
func (x *exchange) providerBase() string {
	path := strings.TrimSuffix(x.path, "/")
	switch x.kind {
	case KindAnthropic:
		path = strings.TrimSuffix(path, anthropicSuffix)
	case kindResponses:
		path = strings.TrimSuffix(path, responsesSuffix)
	default:
		path = strings.TrimSuffix(path, openAISuffix)
	}
	u := *x.p.o.Upstream
	u.Path = strings.TrimSuffix(u.Path, "/") + path + "/"
	u.RawQuery = ""
	return u.String()
}

var errLockWait = errors.New("another request is compacting the same prefix; going on without waiting longer")

// compact runs the gate under the lock of the prefix it folds, or
// recovers from an overflow when over is set. A request that finds the
// lock taken waits for it, within its own deadline and LockWait, and
// first tries the compaction the holder stored; one that would wait
// longer goes on uncompacted.
func (x *exchange) compact(ctx context.Context, over *overflowError) error {
	lock, err := x.lock(ctx, x.lockName(over != nil))
	switch {
	case errors.Is(err, errLockWait) || (err != nil && ctx.Err() != nil):
		x.p.m.lockWaitTimout.Inc()
		return errLockWait
	case err != nil:
		x.p.m.storeErrors.Inc()
		x.log.Warn("compaction store lock failed; compacting without it", "err", err)
	default:
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), x.p.o.StoreTimeout)
			defer cancel()
			if err := lock.Release(rctx); err != nil {
				x.log.Warn("releasing the conversation lock", "err", err)
			}
		}()
	}
	// What the previous holder stored may be all this request needs.
	if rec := x.latest(ctx); rec != nil && (x.rec == nil || rec.Key != x.rec.Key) && x.reusable(rec) {
		x.apply(rec)
		if err := x.build(); err != nil {
			return err
		}
		// An overflowed request did not carry this compaction yet: the
		// retry sends it before anything is folded further.
		if over != nil || !x.needsFolding() {
			x.log.Info("reused the compaction another request stored", "key", rec.Key[:16])
			return nil
		}
	}
	// A compaction of this very prefix may be stored under another
	// conversation head (a fork): reuse it rather than pay again.
	if over == nil {
		if plan, err := x.eng.Plan(x.sess, x.planOptions()); err == nil {
			if cut := x.rawIndex(plan.FirstKeptID); cut > 0 && (x.rec == nil || cut > x.rec.FoldedCount) {
				sctx, cancel := context.WithTimeout(ctx, x.p.o.StoreTimeout)
				rec, err := x.p.o.Store.Get(sctx, x.recordKey(x.prefixHash(cut)))
				cancel()
				if err == nil && x.matches(rec) && x.reusable(rec) {
					x.apply(rec)
					x.log.Info("reused a stored compaction of the same prefix", "key", rec.Key[:16])
					return x.put(ctx, rec)
				}
			}
		}
	}
	before := len(x.sess.Compactions())
	trigger := "gate"
	if over != nil {
		trigger = "overflow"
	} else if x.due() == cost.DueCold {
		trigger = "cache_expired"
	}
	switch {
	case x.agentSummary != "":
		// The strategies fold it; dropping messages unsummarized would
		// leave the agent's summary without them.
		c, err := x.eng.Compact(ctx, x.sess, host.CompactOptions{})
		if err != nil {
			return err
		}
		if c.Emergency {
			return errors.New("only the emergency path could fold the agent's own summary request; it goes on as it is")
		}
	case over != nil:
		retry, err := x.eng.RecoverOverflow(ctx, x.sess, over)
		if err != nil {
			return err
		}
		if !retry {
			return errors.New("the engine found nothing to fold")
		}
	default:
		d, err := x.eng.EnsureFits(ctx, x.sess, x.overhead())
		if err != nil {
			return err
		}
		x.log.Debug("gate acted", "action", d.Action.String(), "tokens_before", d.TokensBefore, "tokens_after", d.TokensAfter)
	}
	cs := x.sess.Compactions()
	if len(cs) <= before {
		return nil
	}
	rec, err := x.record(cs[len(cs)-1])
	if err != nil {
		return err
	}
	x.apply(rec)
	x.action = actionCompacted
	x.p.m.compactions.WithLabelValues(rec.Strategy, trigger).Inc()
	if x.cost > 0 {
		model := x.compactionModel()
		if rec.Strategy == host.StrategyCachedPrompt {
			model = x.model // the conversation's own model made it
		}
		x.p.m.summaryCost.WithLabelValues(model).Add(x.cost)
	}
	x.log.Info("compacted", "trigger", trigger, "strategy", rec.Strategy, "offline", rec.Offline, "folded_messages", rec.FoldedCount,
		"tokens_before", rec.TokensBefore, "tokens_after", rec.TokensAfter, "cost_usd", rec.CostUSD, "key", rec.Key[:16])
	return x.put(ctx, rec)
}

// reusable reports whether a stored compaction may stand for this
// request's prefix. The agent's own summary request never takes an
// emergency compaction: the agent's summary would be written from the
// few messages the emergency path kept.
func (x *exchange) reusable(rec *store.Record) bool {
	return x.agentSummary == "" || rec.Strategy != host.StrategyEmergency
}

// put stores rec as the conversation's newest compaction. A store that
// fails costs a summary next time, not this request.
func (x *exchange) put(ctx context.Context, rec *store.Record) error {
	rec.Conversation = x.conv
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), x.p.o.StoreTimeout)
	defer cancel()
	if err := x.p.o.Store.Put(sctx, rec); err != nil {
		x.p.m.storeErrors.Inc()
		x.log.Warn("the compaction could not be stored; later requests will compact again", "err", err)
	}
	x.keepOriginals(ctx, rec)
	return nil
}

// lockName names the lock of what this request's compaction folds: the
// conversation and the whole prefix up to the planned cut (for an
// overflow, the whole request). Two requests that fold the same prefix
// wait for one another, and one summary serves both; a request that only
// shares the conversation's head folds another prefix and never waits.
func (x *exchange) lockName(overflow bool) string {
	cut := len(x.raw.msgs)
	if !overflow {
		if plan, err := x.eng.Plan(x.sess, x.planOptions()); err == nil {
			if c := x.rawIndex(plan.FirstKeptID); c > 0 {
				cut = c
			}
		}
	}
	h := sha256.Sum256([]byte(x.conv + "\x00" + x.prefixHash(cut)))
	return "prefix-" + hex.EncodeToString(h[:])
}

// lock takes the named lock, waiting for another holder until LockWait
// or the request's own deadline, whichever is first.
func (x *exchange) lock(ctx context.Context, name string) (store.Lock, error) {
	deadline := time.Now().Add(x.p.o.LockWait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	wait := 20 * time.Millisecond
	for {
		sctx, cancel := context.WithTimeout(ctx, x.p.o.StoreTimeout)
		l, err := x.p.o.Store.Lock(sctx, name, x.p.o.LockLease)
		cancel()
		if !errors.Is(err, store.ErrLocked) {
			return l, err
		}
		if time.Now().Add(wait).After(deadline) {
			return nil, errLockWait
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, time.Second)
	}
}

// record turns the engine's compaction into a store record: the cut in
// the request's own messages and the replacement in its own format.
func (x *exchange) record(c host.Compaction) (*store.Record, error) {
	msgs := x.sess.Messages()
	cut := -1
	for i := range msgs {
		if msgs[i].ID == c.FoldedThrough {
			cut = len(x.raw.msgs)
			if i+1 < len(msgs) {
				cut = x.rawIndex(msgs[i+1].ID)
			}
			break
		}
	}
	if cut <= 0 || cut >= len(x.raw.msgs) {
		return nil, fmt.Errorf("the compaction's cut (%d of %d messages) cannot be expressed in the request", cut, len(x.raw.msgs))
	}
	var repl bytes.Buffer
	repl.WriteByte('[')
	for _, m := range x.sess.Context() {
		ri := x.rawIndex(m.ID)
		if ri >= cut {
			break
		}
		var elem []byte
		switch {
		case ri >= 0:
			// A pinned message (a provider's own compaction item
			// among them), kept as it was sent.
			elem = x.raw.msg(ri)
		case m.Summary:
			elem = x.summaryMessage(m)
		default:
			continue // the system prompt, which stays where it is
		}
		if repl.Len() > 1 {
			repl.WriteByte(',')
		}
		repl.Write(elem)
	}
	repl.WriteByte(']')
	ph := x.prefixHash(cut)
	return &store.Record{
		Key: x.recordKey(ph), Conversation: x.conv, PrefixHash: ph, FoldedCount: cut,
		Replacement: repl.Bytes(), Summary: c.Summary, Strategy: c.Strategy, Offline: c.Offline,
		TokensBefore: c.TokensBefore, TokensAfter: c.TokensAfter, CostUSD: x.cost, CreatedAt: c.Time,
	}, nil
}

// summaryMessage writes the engine's summary message in the request's
// format.
func (x *exchange) summaryMessage(m abi.Message) []byte {
	var text strings.Builder
	for _, b := range m.Content {
		text.WriteString(b.Text)
	}
	var v any
	switch x.kind {
	case KindGemini:
		v = formats.GeminiContents([]abi.Message{{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: text.String()}}}})[0]
	case kindResponses:
		v = formats.ResponsesItems(abi.Message{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: text.String()}}})[0]
	case KindAnthropic:
		type block struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		v = struct {
			Role    string  `json:"role"`
			Content []block `json:"content"`
		}{"user", []block{{"text", text.String()}}}
	default:
		v = struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}{"user", text.String()}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// overflowError is an upstream overflow answer, for RecoverOverflow.
type overflowError struct {
	status int
	body   []byte
}

func (e *overflowError) Error() string {
	return "upstream context overflow (status " + strconv.Itoa(e.status) + ")"
}
func (e *overflowError) HTTPStatus() int  { return e.status }
func (e *overflowError) HTTPBody() []byte { return e.body }

var _ overflow.HTTPError = (*overflowError)(nil)

// recoverOverflow compacts after the upstream refused the request as too
// long and returns the body to send once more; ok is false when there is
// nothing better to send.
func (x *exchange) recoverOverflow(ctx context.Context, status int, body []byte, res overflow.Result) (retry []byte, ok bool) {
	if x.raw == nil {
		return nil, false
	}
	x.log.Warn("upstream context overflow; compacting for one retry", "reason", res.Reason, "window", res.ContextWindow)
	if x.sess == nil {
		if err := x.build(); err != nil {
			x.fallback("overflow read", err)
			return nil, false
		}
	}
	sent := x.out
	if err := x.compact(ctx, &overflowError{status: status, body: body}); err != nil {
		x.fallback(stage("overflow compaction", err), err)
		return nil, false
	}
	if bytes.Equal(sent, x.out) {
		return nil, false
	}
	return x.out, true
}
