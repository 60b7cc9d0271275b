package proxy

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/compact-host/compact-host/host/recall"
	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/internal/recallmcp"
	"github.com/compact-host/compact-host/internal/recallstore"
	"github.com/compact-host/compact-host/internal/tenant"
)

// MCPPath is where the proxy serves the recall tools (Options.MCP): the
// Model Context Protocol over streamable HTTP, for the tenant of the
// request's credential.
const MCPPath = AdminPrefix + "mcp"

// maxMCPTenants bounds the tenants whose MCP servers (and the indexes
// they read) are kept between requests.
const maxMCPTenants = 1000

// keepOriginals stores what rec folded, the original messages of the
// conversation up to rec.FoldedCount, so that its markers can be recalled
// (package recallstore). A store that cannot keep them costs the recall
// of these markers, not the request.
func (x *exchange) keepOriginals(ctx context.Context, rec *store.Record) {
	ss, ok := x.p.o.Store.(store.Sessions)
	if x.p.o.DiscardOriginals || !ok || x.sess == nil {
		return
	}
	all := x.sess.Messages()
	w := recallstore.Write{Tenant: string(x.cred.tenant), Conversation: x.conv, Keys: recall.KeysFor(all), Through: rec.FoldedCount}
	for i := range all {
		m := &all[i]
		ri := x.rawIndex(m.ID)
		if ri < 0 || ri >= rec.FoldedCount || m.Summary {
			continue
		}
		w.Messages = append(w.Messages, *m)
		w.Positions = append(w.Positions, ri)
	}
	if len(w.Keys) == 0 {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), x.p.o.StoreTimeout)
	defer cancel()
	n, err := recallstore.Keep(sctx, ss, w)
	switch {
	case errors.Is(err, store.ErrSessionTooLarge):
		x.p.m.storeErrors.Inc()
		x.log.Warn("the conversation's originals are at the store's size limit (max_session_bytes); the markers of this compaction cannot be recalled", "err", err)
	case err != nil:
		x.p.m.storeErrors.Inc()
		x.log.Warn("the folded originals could not be stored; this compaction's markers cannot be recalled", "err", err)
	case n > 0:
		x.log.Debug("kept the folded originals", "messages", n, "through", rec.FoldedCount, "tenant", string(x.cred.tenant))
	}
}

// hintAgrees reports whether rec's summary names the recall tools exactly
// when this proxy's summaries do: a compaction stored while the tools were
// served must not reach an agent that now lacks them (nor the reverse
// leave them unnamed); such a request is compacted anew.
func (x *exchange) hintAgrees(rec *store.Record) bool {
	return strings.Contains(rec.Summary, recall.Hint) == x.p.o.Config.RecallHint
}

// mcpServers are the proxy's MCP servers, one per tenant: each reads the
// tenant's originals only.
type mcpServers struct {
	sessions store.Sessions
	// cache holds the indexes of every tenant, within one bound.
	cache    *recallmcp.IndexCache
	mu       sync.Mutex
	byTenant map[tenant.ID]*mcp.Server
}

func (s *mcpServers) of(t tenant.ID) *mcp.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	if srv := s.byTenant[t]; srv != nil {
		return srv
	}
	if len(s.byTenant) >= maxMCPTenants {
		clear(s.byTenant)
	}
	srv := recallmcp.NewServer(&recallmcp.StoreSource{Sessions: s.sessions, Tenant: string(t), Cache: s.cache}, "proxy")
	s.byTenant[t] = srv
	return srv
}

type tenantKey struct{}

// newMCPHandler serves the recall tools over the originals the proxy keeps.
// It is stateless: each request is answered by the server of its own
// credential's tenant, so no MCP session can carry one tenant's server to
// another's request.
func (p *Proxy) newMCPHandler() (http.Handler, error) {
	ss, ok := p.o.Store.(store.Sessions)
	if !ok {
		return nil, errors.New("proxy: the MCP server reads the originals from the store's sessions, which this store does not keep")
	}
	servers := &mcpServers{sessions: ss, cache: &recallmcp.IndexCache{}, byTenant: map[tenant.ID]*mcp.Server{}}
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		return servers.of(r.Context().Value(tenantKey{}).(tenant.ID))
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: p.log})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred := p.credentialsOf(r)
		if len(cred.known) == 0 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="compact-host proxy mcp"`)
			http.Error(w, "compact-host proxy: the MCP server answers for the credential the agent sends upstream: send it as x-api-key, Authorization, x-goog-api-key or api-key", http.StatusUnauthorized)
			return
		}
		if r.ContentLength > recallmcp.MaxBodyBytes {
			http.Error(w, "compact-host proxy: request body over "+strconv.Itoa(recallmcp.MaxBodyBytes)+" bytes", http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, recallmcp.MaxBodyBytes)
		p.log.Debug("mcp request", "method", r.Method, "tenant", string(cred.tenant))
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, cred.tenant)))
	}), nil
}
