package proxy

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the proxy's Prometheus series, in a registry of their own so
// two proxies in one process (tests) do not collide.
type metrics struct {
	reg *prometheus.Registry

	requests       *prometheus.CounterVec
	compactions    *prometheus.CounterVec
	fallbacks      *prometheus.CounterVec
	overflows      *prometheus.CounterVec
	tokensSaved    *prometheus.CounterVec
	summaryCost    *prometheus.CounterVec
	upstreamTime   *prometheus.HistogramVec
	addedTime      *prometheus.HistogramVec
	storeErrors    prometheus.Counter
	lockWaitTimout prometheus.Counter
	bodyReads      prometheus.Gauge
	breakerOpened  prometheus.Counter
	breakerSkipped prometheus.Counter
}

func newMetrics() *metrics {
	const ns = "compact_host_proxy"
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "requests_total",
		Help: "Requests by API kind and what the proxy did: passthrough (not a messages request), forwarded (unchanged), spliced (a stored compaction reused), compacted (a new compaction), fallback (compaction failed, forwarded without it), unparsed (forwarded untouched), oversized (over the body limit, forwarded untouched), busy (too many bodies being read, forwarded untouched), body_timeout (the body did not arrive in time), refused (a path with dot segments), previous_response_id (a Responses request chained on a stored response, whose history the provider holds: forwarded untouched), websocket_refused (a Responses WebSocket answered 426 so the agent uses HTTP), websocket (a Responses WebSocket forwarded uncompacted), websocket_relayed (a Responses WebSocket relayed, each request on it counted by its own action), websocket_upstream_refused (the upstream refused the WebSocket; its answer went back to the client), agent_summary (the agent's own summary request: forwarded whole, or folded by a summary when it would not fit), undecoded (a Content-Encoding the proxy does not read, or a decoded body over the limit: forwarded untouched)."},
		[]string{"kind", "action"})
	m.compactions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "compactions_total",
		Help: "New compactions by strategy and trigger (gate or overflow)."}, []string{"strategy", "trigger"})
	m.fallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "fallbacks_total",
		Help: "Requests forwarded without the compaction they needed, by reason."}, []string{"reason"})
	m.overflows = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "overflow_retries_total",
		Help: "Upstream context-overflow errors, by result: retried (compacted and sent again) or passed (the error went to the client)."}, []string{"result"})
	m.tokensSaved = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "tokens_saved_total",
		Help: "Estimated input tokens (chars/4) not sent upstream because a compaction replaced them."}, []string{"kind"})
	m.summaryCost = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "summary_cost_usd_total",
		Help: "What the summaries cost, priced from the catalog."}, []string{"model"})
	buckets := []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}
	m.upstreamTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "upstream_latency_seconds",
		Help: "Time from sending a request upstream to its response headers.", Buckets: buckets}, []string{"kind"})
	m.addedTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "added_latency_seconds",
		Help: "Time from a messages request's whole body to its sending upstream: the gate, the store, compaction.", Buckets: buckets}, []string{"kind"})
	m.storeErrors = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "store_errors_total",
		Help: "Compaction store calls that failed; the request went on without the store."})
	m.lockWaitTimout = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "lock_wait_timeouts_total",
		Help: "Requests that went on uncompacted rather than wait longer (past --lock-wait or their own deadline) for another request's compaction of the same prefix."})
	m.bodyReads = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "body_reads_in_progress",
		Help: "Request bodies being read into memory now."})
	m.breakerOpened = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "summary_breaker_opened_total",
		Help: "Times a tenant's summary calls failed often enough in a row to be skipped for the cool-down."})
	m.breakerSkipped = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "summary_breaker_skipped_total",
		Help: "Compactions made without a model because the tenant's summary breaker was open."})
	m.reg.MustRegister(m.requests, m.compactions, m.fallbacks, m.overflows, m.tokensSaved, m.summaryCost,
		m.upstreamTime, m.addedTime, m.storeErrors, m.lockWaitTimout, m.bodyReads, m.breakerOpened, m.breakerSkipped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
