package proxy

import (
	"net/http"
	"strings"

	"github.com/compact-host/compact-host/internal/tenant"
)

// credentialSources are where the APIs the proxy speaks carry a key: the
// header, or the query parameter Gemini accepts. Each value found is part
// of the request's credential, under its source's name, so a key sent as
// x-api-key and the same key sent as a Bearer token are two tenants (the
// safe side: nothing is shared that was not sent the same way).
var credentialSources = []string{"X-Api-Key", "Authorization", "X-Goog-Api-Key", "Api-Key"}

// credentials are a request's secrets: the credential that names its
// tenant, and every secret value seen, for redaction.
type credentials struct {
	tenant tenant.ID
	known  []string
}

// credentialsOf reads r's credentials. In shared mode every request is the
// one tenant.Shared; its secrets are still learnt for redaction.
func (p *Proxy) credentialsOf(r *http.Request) credentials {
	var id strings.Builder
	var known []string
	add := func(source, v string) {
		if v == "" {
			return
		}
		known = append(known, v)
		id.WriteString(source)
		id.WriteByte(0)
		id.WriteString(v)
		id.WriteByte(0)
	}
	for _, h := range credentialSources {
		for _, v := range r.Header.Values(h) {
			if h == "Authorization" {
				// The scheme is not the secret: "Bearer k" and "bearer k"
				// are one key, and k alone is what an upstream quotes.
				if scheme, token, ok := strings.Cut(v, " "); ok {
					known = append(known, strings.TrimSpace(token))
					v = strings.ToLower(scheme) + " " + strings.TrimSpace(token)
				}
			}
			add(h, v)
		}
	}
	for _, v := range r.URL.Query()["key"] {
		add("key", v)
	}
	c := credentials{tenant: p.keyer.Of(id.String()), known: known}
	if p.o.ShareCompactions {
		c.tenant = tenant.Shared
	}
	return c
}
