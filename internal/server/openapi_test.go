package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/cost"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/internal/cachestate"
	"github.com/compact-host/compact-host/internal/proxy"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	liberrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openAPIDoc is the served document as plain JSON, for the checks that
// walk it.
type openAPIDoc struct {
	OpenAPI string `json:"openapi"`
	Paths   map[string]map[string]json.RawMessage
	Comps   struct {
		Schemas map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
			Enum       []string                   `json:"enum"`
		} `json:"schemas"`
	} `json:"components"`
}

func loadOpenAPI(t testing.TB) openAPIDoc {
	t.Helper()
	var d openAPIDoc
	require.NoError(t, json.Unmarshal(OpenAPI, &d), "openapi.json is JSON")
	return d
}

// openAPIValidator validates exchanges against the document. In strict
// mode a response field the document does not declare is an error, so
// a field added to a wire type and left out of the document fails. The
// values that carry the caller's own session (any fields a provider's
// request has) are left open.
func openAPIValidator(t testing.TB, strict bool) validator.Validator {
	t.Helper()
	doc, err := libopenapi.NewDocument(OpenAPI)
	require.NoError(t, err)
	var opts []config.Option
	if strict {
		opts = append(opts, config.WithStrictMode(), config.WithStrictIgnorePaths(
			"$.body.session", "$.body.session.**", "$.body.messages[*].**", "$.body.system[*].**",
			"$.body.context.messages[*].**", "$.body.context.system[*].**"),
			// Every answer carries it; it is not the API's.
			config.WithStrictIgnoredHeadersExtra("X-Content-Type-Options"))
	}
	v, errs := validator.NewValidator(doc, opts...)
	require.Empty(t, errs, "build the validator")
	return v
}

func describe(errs []*liberrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n- %s: %s", e.Message, e.Reason)
		for _, f := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n    at %s: %s", f.FieldPath, f.Reason)
		}
	}
	return b.String()
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	v := openAPIValidator(t, false)
	ok, errs := v.ValidateDocument()
	assert.True(t, ok, "the document breaks the OpenAPI 3.1 schema:%s", describe(errs))

	doc, err := libopenapi.NewDocument(OpenAPI)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(doc.GetVersion(), "3.1."), "version %s", doc.GetVersion())
	_, err = doc.BuildV3Model()
	require.NoError(t, err, "every $ref resolves")

	// The error codes are the API's, no more, no fewer.
	src, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	require.NoError(t, err)
	var codes []string
	ast.Inspect(src, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && strings.HasPrefix(vs.Names[0].Name, "Code") {
			c, err := strconv.Unquote(vs.Values[0].(*ast.BasicLit).Value)
			require.NoError(t, err)
			codes = append(codes, c)
		}
		return true
	})
	require.NotEmpty(t, codes)
	assert.ElementsMatch(t, codes, loadOpenAPI(t).Comps.Schemas["ErrorCode"].Enum)
}

// TestOpenAPICoversEveryRoute fails when a route of the server is missing
// from the document, and when the document has a path nothing serves.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	s, err := New(Options{Config: testConfig, Registry: registry})
	require.NoError(t, err)
	d := loadOpenAPI(t)
	for path, rt := range s.routes {
		ops, ok := d.Paths[path]
		if assert.True(t, ok, "openapi.json lacks the path %s", path) {
			assert.Contains(t, ops, strings.ToLower(rt.method), "openapi.json lacks %s %s", rt.method, path)
		}
	}
	served := map[string]bool{}
	for path := range s.routes {
		served[path] = true
	}
	require.NotEmpty(t, s.sessionRoutes)
	for key := range s.sessionRoutes {
		method, path, ok := strings.Cut(key, " ")
		require.True(t, ok, "session route %q is METHOD PATTERN", key)
		served[path] = true
		ops, ok := d.Paths[path]
		if assert.True(t, ok, "openapi.json lacks the path %s", path) {
			assert.Contains(t, ops, strings.ToLower(method), "openapi.json lacks %s", key)
		}
	}
	for path, ops := range d.Paths {
		if strings.HasPrefix(path, proxy.AdminPrefix) {
			assert.Contains(t, ops, "servers", "%s is the proxy's: it names the proxy as its server", path)
			continue
		}
		assert.True(t, served[path], "openapi.json documents %s, which the server does not serve", path)
		for op := range ops {
			if op == "parameters" || op == "servers" || op == "summary" || op == "description" {
				continue
			}
			_, plain := s.routes[path]
			_, session := s.sessionRoutes[strings.ToUpper(op)+" "+path]
			assert.True(t, plain && strings.EqualFold(s.routes[path].method, op) || session,
				"openapi.json documents %s %s, which the server does not serve", strings.ToUpper(op), path)
		}
	}
}

// TestOpenAPISchemasMatchTheWireTypes checks both ways that each schema
// declares the JSON fields of its Go type, so that a field added to
// either is added to the other.
func TestOpenAPISchemasMatchTheWireTypes(t *testing.T) {
	d := loadOpenAPI(t)
	for name, v := range map[string]any{
		"Health": Health{}, "PluginsResponse": PluginsResponse{}, "PluginInfo": PluginInfo{},
		"CompactRequest": CompactRequest{}, "CompactOptions": CompactOptions{}, "EngineOptions": EngineOptions{},
		"Thresholds": Thresholds{}, "CompactResponse": CompactResponse{}, "CompactReport": CompactReport{},
		"Plan": Plan{}, "Context": Context{}, "CheckRequest": CheckRequest{}, "GateRequest": GateRequest{},
		"CheckResponse": CheckResponse{}, "Budget": Budget{}, "Decision": Decision{},
		"TruncateRequest": TruncateRequest{}, "TruncateResponse": TruncateResponse{},
		"CanonicalMessage": abi.Message{}, "Block": abi.Block{}, "Usage": abi.Usage{},
		"SessionRequest": SessionRequest{}, "AppendRequest": AppendRequest{}, "SessionUpdate": SessionUpdate{},
		"SessionView": SessionView{}, "SessionDeleted": SessionDeleted{}, "SessionOriginals": SessionOriginals{},
		"SessionCache": SessionCache{}, "SessionCost": SessionCost{}, "Growth": cost.Growth{}, "Bill": cost.Bill{},
		"CompactionCost": cachestate.CompactionCost{},
	} {
		schema, ok := d.Comps.Schemas[name]
		if !assert.True(t, ok, "no schema %s", name) {
			continue
		}
		var declared []string
		for p := range schema.Properties {
			declared = append(declared, p)
		}
		assert.ElementsMatch(t, jsonFields(reflect.TypeOf(v)), declared, "schema %s and %T", name, v)
		for _, r := range schema.Required {
			assert.Contains(t, schema.Properties, r, "schema %s requires an undeclared %s", name, r)
		}
	}
	errProps := map[string]bool{}
	var errSchema struct {
		Properties struct {
			Error struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"error"`
		} `json:"properties"`
	}
	var raw struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(OpenAPI, &raw))
	require.NoError(t, json.Unmarshal(raw.Components.Schemas["Error"], &errSchema))
	for p := range errSchema.Properties.Error.Properties {
		errProps[p] = true
	}
	for _, f := range jsonFields(reflect.TypeOf(apiError{})) {
		assert.True(t, errProps[f], "schema Error lacks error.%s", f)
	}
	assert.Len(t, errProps, len(jsonFields(reflect.TypeOf(apiError{}))))
}

// exchange is one request of TestOpenAPIMatchesRealAnswers.
type exchange struct {
	name   string
	ts     *httptest.Server
	method string
	path   string
	body   any
	header []string
	status int
	code   string // the error code, for an error
}

func TestOpenAPIMatchesRealAnswers(t *testing.T) {
	_, ts := start(t, nil)
	_, locked := start(t, func(o *Options) { o.Tokens = []Token{{Secret: "s3cret"}} })
	_, small := start(t, func(o *Options) { o.MaxRequestBytes = 512 })
	msgs := codingSession(31, 8, 600)
	msgs[0].Pinned = true
	canonical := encode(t, "canonical", msgs)
	anthropic := encode(t, formats.Anthropic, msgs)
	openai := encode(t, formats.OpenAI, msgs)
	auth := []string{"Authorization", "Bearer s3cret"}

	cases := []exchange{
		{"health", ts, "GET", "/healthz", nil, nil, 200, ""},
		{"health without the token", locked, "GET", "/healthz", nil, nil, 200, ""},
		{"openapi", locked, "GET", "/openapi.json", nil, nil, 200, ""},
		{"plugins", ts, "GET", "/v1/plugins", nil, nil, 200, ""},
		{"plugins with the token", locked, "GET", "/v1/plugins", nil, auth, 200, ""},
		{"compact to canonical", ts, "POST", "/v1/compact", CompactRequest{Session: canonical}, nil, 200, ""},
		{"compact to anthropic", ts, "POST", "/v1/compact", CompactRequest{Session: anthropic, Options: CompactOptions{Focus: "the handler"}}, nil, 200, ""},
		{"compact openai to canonical", ts, "POST", "/v1/compact", CompactRequest{Session: openai, OutputFormat: "canonical"}, nil, 200, ""},
		{"compact jsonl", ts, "POST", "/v1/compact", CompactRequest{Session: encode(t, "jsonl", msgs), Format: "canonical"}, nil, 200, ""},
		{"compact dry run", ts, "POST", "/v1/compact", map[string]any{"session": canonical, "options": map[string]any{"dry_run": true, "keep_recent_tokens": 2000}}, nil, 200, ""},
		{"compact under the threshold", ts, "POST", "/v1/compact", map[string]any{"session": canonical, "options": map[string]any{"threshold": 0.99}}, nil, 200, ""},
		{"check", ts, "POST", "/v1/check", CheckRequest{Session: anthropic, Request: GateRequest{ToolSchemaTokens: 500}}, nil, 200, ""},
		{"check applied", ts, "POST", "/v1/check", CheckRequest{Session: openai, Apply: true, Options: EngineOptions{ContextWindow: 12000}}, nil, 200, ""},
		{"truncate", ts, "POST", "/v1/truncate", TruncateRequest{Tool: "Bash", Content: filler("out", 3000), MaxTokens: 200}, nil, 200, ""},

		{"session created", ts, "PUT", "/v1/sessions/chat-1", SessionRequest{Session: encode(t, "canonical", msgs[:4]), Options: CompactOptions{EngineOptions: EngineOptions{ContextWindow: 14000}}}, nil, 201, ""},
		{"session replaced", ts, "PUT", "/v1/sessions/chat-1", SessionRequest{Session: encode(t, "canonical", msgs[:4]), Options: CompactOptions{EngineOptions: EngineOptions{ContextWindow: 14000}}}, nil, 200, ""},
		{"session appended and compacted", ts, "POST", "/v1/sessions/chat-1/messages", AppendRequest{Messages: encode(t, "canonical", msgs[4:])}, nil, 200, ""},
		{"session read", ts, "GET", "/v1/sessions/chat-1", nil, nil, 200, ""},
		{"session read as anthropic", ts, "GET", "/v1/sessions/chat-1?output_format=anthropic", nil, nil, 200, ""},
		{"session read as openai", ts, "GET", "/v1/sessions/chat-1?output_format=openai", nil, nil, 200, ""},
		{"session at another revision", ts, "PUT", "/v1/sessions/chat-1", map[string]any{"session": canonical, "if_revision": 1}, nil, 409, CodeRevisionConflict},
		{"session deleted", ts, "DELETE", "/v1/sessions/chat-1", nil, nil, 200, ""},
		{"session gone", ts, "GET", "/v1/sessions/chat-1", nil, nil, 404, CodeSessionNotFound},
		{"append to no session", ts, "POST", "/v1/sessions/chat-2/messages", AppendRequest{Messages: encode(t, "canonical", msgs[4:6])}, nil, 404, CodeSessionNotFound},
		{"session id refused", ts, "PUT", "/v1/sessions/-x", SessionRequest{Session: canonical}, nil, 400, CodeBadRequest},

		{"bad json", ts, "POST", "/v1/compact", `{"session": `, nil, 400, CodeBadJSON},
		{"unknown field", ts, "POST", "/v1/check", `{"session": [], "sesion": 1}`, nil, 400, CodeUnknownField},
		{"no session", ts, "POST", "/v1/compact", `{}`, nil, 400, CodeBadRequest},
		{"bad session", ts, "POST", "/v1/compact", map[string]any{"session": "{\"role\":\"user\"}\nnot json\n", "format": "canonical"}, nil, 400, CodeBadSession},
		{"unknown format", ts, "POST", "/v1/compact", map[string]any{"session": canonical, "format": "word"}, nil, 400, CodeUnknownFormat},
		{"unknown strategy", ts, "POST", "/v1/compact", map[string]any{"session": canonical, "options": map[string]any{"strategy": "nope"}}, nil, 400, CodeUnknownStrategy},
		{"bad options", ts, "POST", "/v1/check", map[string]any{"session": canonical, "options": map[string]any{"model": "no-such-model"}}, nil, 400, CodeBadOptions},
		{"no token", locked, "POST", "/v1/truncate", TruncateRequest{Content: "x"}, nil, 401, CodeUnauthorized},
		{"wrong method", ts, "GET", "/v1/compact", nil, nil, 405, CodeMethodNotAllowed},
		{"too large", small, "POST", "/v1/compact", CompactRequest{Session: canonical}, nil, 413, CodeTooLarge},
	}
	strict := openAPIValidator(t, true)
	loose := openAPIValidator(t, false)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, resp := c.run(t)
			require.Equal(t, c.status, resp.StatusCode, "%s", resp.body)
			if c.status < 300 {
				// The requests that succeed are ones the document allows.
				ok, errs := loose.ValidateHttpRequest(req.clone(t))
				assert.True(t, ok, "the document rejects a request the server takes:%s", describe(errs))
			} else {
				var b struct{ Error errorBody }
				require.NoError(t, json.Unmarshal(resp.body, &b))
				assert.Equal(t, c.code, b.Error.Code, "%s", resp.body)
			}
			if c.status == http.StatusMethodNotAllowed {
				// The document lists the methods a path takes; the answer
				// to another is the Error every error is.
				assert.NotEmpty(t, resp.header.Get("Allow"))
				ok, errs := schema_validation.NewSchemaValidator().ValidateSchemaBytes(errorSchema(t), resp.body)
				assert.True(t, ok, "the 405 body is not an Error:%s", describe(errs))
				return
			}
			v := strict
			if c.path == "/openapi.json" {
				// The OpenAPI spec describes the document's contents;
				// TestOpenAPIDocumentIsValid checks them.
				v = loose
			}
			ok, errs := v.ValidateHttpResponse(req.clone(t), resp.response())
			assert.True(t, ok, "the answer does not match the document:%s\n%s", describe(errs), snippetOf(resp.body))
		})
	}
}

// TestOpenAPIValidationCatchesDrift shows that the checks above can fail:
// an answer with a field the document lacks, or without one it requires,
// is rejected.
func TestOpenAPIValidationCatchesDrift(t *testing.T) {
	strict := openAPIValidator(t, true)
	req := httptest.NewRequest("GET", "http://127.0.0.1/healthz", nil)
	for _, body := range []string{
		`{"status":"ok","version":"v1","abi":"v1.0","plugins":3,"uptime_seconds":9}`,
		`{"status":"ok","version":"v1","plugins":3}`,
		`{"status":"ok","version":"v1","abi":"v1.0","plugins":"3"}`,
	} {
		resp := &answer{StatusCode: 200, header: http.Header{"Content-Type": {"application/json"}}, body: []byte(body)}
		ok, _ := strict.ValidateHttpResponse(req, resp.response())
		assert.False(t, ok, "accepted %s", body)
	}
	resp := &answer{StatusCode: 418, header: http.Header{"Content-Type": {"application/json"}}, body: []byte(`{"error":{"code":"teapot","message":"no"}}`)}
	ok, _ := strict.ValidateHttpResponse(httptest.NewRequest("POST", "http://127.0.0.1/v1/compact", nil), resp.response())
	assert.False(t, ok, "accepted an undocumented status and code")
}

// TestOpenAPIServedAsIs checks GET /openapi.json serves the embedded
// document, and that a 404 (a path the document cannot list) has the
// documented error body.
func TestOpenAPIServedAsIs(t *testing.T) {
	_, ts := start(t, nil)
	r := call(t, ts, "GET", "/openapi.json", nil)
	r.wantStatus(t, http.StatusOK)
	assert.Equal(t, OpenAPI, r.Body)
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	head := call(t, ts, "HEAD", "/openapi.json", nil)
	head.wantStatus(t, http.StatusOK)
	assert.Empty(t, head.Body)

	nf := call(t, ts, "GET", "/v1/nowhere", nil)
	nf.wantError(t, http.StatusNotFound, CodeNotFound)
	ok, errs := schema_validation.NewSchemaValidator().ValidateSchemaBytes(errorSchema(t), nf.Body)
	assert.True(t, ok, "the 404 body is not an Error:%s", describe(errs))
	assert.Contains(t, nf.err(t).Message, "GET /openapi.json", "the 404 lists the endpoints")
}

// TestOpenAPIProxyAdmin checks the proxy's admin answers against the
// document, on a real proxy.
func TestOpenAPIProxyAdmin(t *testing.T) {
	up, err := url.Parse("http://127.0.0.1:9") // never called: admin paths stay in the proxy
	require.NoError(t, err)
	p, err := proxy.New(proxy.Options{Upstream: up, Offline: true, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ts := httptest.NewServer(p)
	t.Cleanup(ts.Close)
	v := openAPIValidator(t, true)
	for _, path := range []string{proxy.AdminPrefix + "metrics", proxy.AdminPrefix + "healthz"} {
		c := exchange{name: path, ts: ts, method: "GET", path: path, status: 200}
		req, resp := c.run(t)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", resp.body)
		ok, errs := v.ValidateHttpResponse(req.clone(t), resp.response())
		assert.True(t, ok, "%s does not match the document:%s", path, describe(errs))
		if strings.HasSuffix(path, "metrics") {
			assert.Contains(t, string(resp.body), "compact_host_proxy_", "the proxy's series")
		}
	}
}

// errorSchema is the document's Error schema.
func errorSchema(t testing.TB) *base.Schema {
	t.Helper()
	doc, err := libopenapi.NewDocument(OpenAPI)
	require.NoError(t, err)
	m, err := doc.BuildV3Model()
	require.NoError(t, err)
	schema := m.Model.Components.Schemas.GetOrZero("Error").Schema()
	require.NotNil(t, schema)
	return schema
}

// sent is a request as sent, kept to be validated.
type sent struct {
	method, url string
	header      http.Header
	body        []byte
}

func (s sent) clone(t testing.TB) *http.Request {
	t.Helper()
	r, err := http.NewRequest(s.method, s.url, bytes.NewReader(s.body))
	require.NoError(t, err)
	r.Header = s.header.Clone()
	return r
}

// answer is a response read whole, replayable for validation.
type answer struct {
	StatusCode int
	header     http.Header
	body       []byte
}

func (a *answer) response() *http.Response {
	return &http.Response{StatusCode: a.StatusCode, Header: a.header, Body: io.NopCloser(bytes.NewReader(a.body)),
		ContentLength: int64(len(a.body))}
}

func (c exchange) run(t testing.TB) (sent, *answer) {
	t.Helper()
	var body []byte
	switch b := c.body.(type) {
	case nil:
	case string:
		body = []byte(b)
	default:
		var err error
		body, err = json.Marshal(b)
		require.NoError(t, err)
	}
	r := call(t, c.ts, c.method, c.path, body, c.header...)
	h := http.Header{}
	if body != nil {
		h.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(c.header); i += 2 {
		h.Set(c.header[i], c.header[i+1])
	}
	return sent{method: c.method, url: c.ts.URL + c.path, header: h, body: body},
		&answer{StatusCode: r.Status, header: r.Header, body: r.Body}
}

func snippetOf(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}
