package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/internal/jsontype"
	"github.com/compact-host/compact-host/internal/suggest"
	"github.com/compact-host/compact-host/internal/tokencount"
)

// Error codes of the API, in the "code" of an error body. They are part of
// the interface: clients branch on them, not on messages.
const (
	CodeBadJSON          = "bad_json"           // 400: the body is not one JSON object
	CodeUnknownField     = "unknown_field"      // 400: the body has a field the endpoint does not know
	CodeBadRequest       = "bad_request"        // 400: a field is missing, of the wrong type or out of range
	CodeBadSession       = "bad_session"        // 400: the session cannot be read in its format
	CodeInvalidSession   = "invalid_session"    // 400: the session breaks the providers' rules (orphaned tool results...)
	CodeUnknownFormat    = "unknown_format"     // 400: the format is unknown, or cannot be detected
	CodeBadOptions       = "bad_options"        // 400: the options make no valid engine (model not in the catalog...)
	CodeUnknownStrategy  = "unknown_strategy"   // 400: no plugin provides the strategy
	CodeUnknownCategory  = "unknown_category"   // 400: no truncator handles the tool-output category
	CodeUnauthorized     = "unauthorized"       // 401: the bearer token is missing or wrong
	CodeNotFound         = "not_found"          // 404: no such endpoint
	CodeSessionNotFound  = "session_not_found"  // 404: no session has that ID (PUT creates one)
	CodeRevisionConflict = "revision_conflict"  // 409: the session is not at if_revision; read it again and retry
	CodeMethodNotAllowed = "method_not_allowed" // 405: the endpoint takes another method
	CodeTooLarge         = "too_large"          // 413: the body is over the size limit
	CodeQuotaExceeded    = "quota_exceeded"     // 507: the session alone is over the bytes a token may keep
	CodeBusy             = "busy"               // 503: no worker came free within the request timeout
	CodeStoreUnavailable = "store_unavailable"  // 503: the session store did not answer; retry later
	CodeTimeout          = "timeout"            // 504: the work did not finish within the request timeout; 408: nor did the body arrive
	CodeInternal         = "internal"           // 500: a bug; the message says what
)

// apiError is an error answer: its status and the body's error object.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Line and Offset place a problem in the session or the body, when
	// known (1-based line; byte offset).
	Line   int    `json:"line,omitempty"`
	Offset *int64 `json:"offset,omitempty"`
	// cause is the failure behind a message kept general (a store's
	// error names its files): the server's log shows it, the client
	// never does.
	cause error
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, CodeBadRequest, format, args...)
}

// writeError writes e as the response.
func writeError(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, struct {
		Error *apiError `json:"error"`
	}{e})
}

// writeJSON writes v as the response body with status. v is encoded
// before the status is sent, so a value JSON cannot hold (a NaN) is a 500
// that says so, never a 200 with an empty body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		b.Reset()
		status = http.StatusInternalServerError
		_ = json.NewEncoder(&b).Encode(map[string]any{"error": errorf(status, CodeInternal, "the answer could not be encoded: %v", err)})
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes()) // the client is gone if this fails
}

// bodyError turns a JSON decoding error of a request body into an answer
// that names the field or the place. v is what the body was decoded into:
// the fields an unknown one is compared with.
func bodyError(body []byte, err error, v any) *apiError {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off := se.Offset
		return &apiError{Status: http.StatusBadRequest, Code: CodeBadJSON, Offset: &off, Line: lineOf(body, se.Offset),
			Message: fmt.Sprintf("the body is not valid JSON: %v (line %d)", se, lineOf(body, se.Offset))}
	case errors.Is(err, errTrailing):
		return errorf(http.StatusBadRequest, CodeBadJSON, "the body must be one JSON object; more follows it")
	case errors.As(err, &te):
		// Embedded Go structs show in the path; they are not JSON keys.
		field := strings.ReplaceAll(te.Field, "EngineOptions.", "")
		switch {
		case field == "":
			return errorf(http.StatusBadRequest, CodeBadJSON, "the body must be a JSON object, not %s", te.Value)
		case tokencount.IsTokensType(te):
			return badRequest("%s: want %s (a number or a string), from 0 to %d; got JSON %s", field, tokencount.Syntax, tokencount.Max, te.Value)
		}
		return badRequest("%s: expected %s, got JSON %s", field, jsontype.Expected(te), te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		return errorf(http.StatusBadRequest, CodeUnknownField, "unknown field %q%s (the fields are in the API reference, GET /openapi.json)",
			name, suggest.Hint(name, jsonFieldNames(reflect.TypeOf(v))))
	case errors.Is(err, errEmptyBody):
		return errorf(http.StatusBadRequest, CodeBadJSON, "the body is empty; send a JSON object")
	}
	return errorf(http.StatusBadRequest, CodeBadJSON, "the body is not valid JSON: %v", err)
}

// jsonFieldNames lists the JSON names of the fields of t's structs, at
// every depth: the names an unknown field may have been meant as.
func jsonFieldNames(t reflect.Type) []string {
	var names []string
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map) {
			t = t.Elem()
		}
		if t == nil || t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case name == "-" || !f.IsExported():
				continue
			case name != "":
				names = append(names, name)
			case !f.Anonymous:
				names = append(names, f.Name)
			}
			walk(f.Type)
		}
	}
	walk(t)
	return names
}

// unknownName is the answer to a value no name of names matches: the
// names, and the close ones.
func unknownName(code, field, value string, names []string) *apiError {
	return errorf(http.StatusBadRequest, code, "%s %q: want one of %s%s", field, value, strings.Join(names, ", "), suggest.Hint(value, names))
}

// StrategyNames lists the strategies reg provides, sorted: for the
// errors of the API and the CLI.
func StrategyNames(ctx context.Context, reg *plugin.Registry) []string {
	return pluginNames(ctx, reg, func(e plugin.Entry) []string {
		if e.Overridden || !e.Info.Has(abi.KindStrategy) {
			return nil
		}
		return []string{e.Name}
	})
}

// CategoryNames lists the tool-output categories reg's truncators
// handle, sorted.
func CategoryNames(ctx context.Context, reg *plugin.Registry) []string {
	return pluginNames(ctx, reg, func(e plugin.Entry) []string {
		if !e.Info.Has(abi.KindTruncator) {
			return nil
		}
		return e.Info.Categories
	})
}

func pluginNames(ctx context.Context, reg *plugin.Registry, of func(plugin.Entry) []string) []string {
	var names []string
	for _, e := range reg.List(ctx) {
		if e.Err != nil {
			continue
		}
		for _, n := range of(e) {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	return names
}

var (
	errTrailing  = errors.New("trailing data after the JSON object")
	errEmptyBody = errors.New("empty body")
)

// lineOf is the 1-based line of byte offset off in data.
func lineOf(data []byte, off int64) int {
	off = min(max(off, 0), int64(len(data)))
	line := 1
	for _, c := range data[:off] {
		if c == '\n' {
			line++
		}
	}
	return line
}
