package overflow

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// details is what parseBody found in a response body. Providers wrap their
// errors differently:
//
//	{"type":"error","error":{"type":"...","message":"..."}}          Anthropic
//	{"error":{"message":"...","type":"...","param":...,"code":"..."}} OpenAI, Azure, Groq, DeepSeek, vLLM
//	{"error":{"code":400,"message":"...","status":"INVALID_ARGUMENT"}} Gemini (sometimes inside an array)
//	{"error":{"message":"...","code":400,"metadata":{"raw":"..."}}}   OpenRouter
//	{"error":{"code":400,"message":"...","type":"exceed_context_size_error","n_prompt_tokens":N,"n_ctx":M}} llama.cpp
//	{"error":"{\"error\":{...llama.cpp...}}"}                          Ollama (JSON inside a string)
//	{"object":"error","message":"...","type":"...","code":...}        Mistral, older vLLM
//	{"code":"...","error":"..."}                                      xAI
//	{"message":"..."}                                                 Bedrock
//
// and some answer with plain text or nothing at all.
type details struct {
	messages []string // human-readable texts, outermost first
	codes    []string // lower-cased code, type, status and reason values
	nCtx     int      // llama.cpp n_ctx
	nPrompt  int      // llama.cpp n_prompt_tokens
	// object is the top-level "object" value ("error" for vLLM and Mistral).
	object string
	// nested is true when an error was found as JSON inside a string, as
	// Ollama wraps the errors of its llama.cpp runner.
	nested bool
}

// maxDepth bounds recursion into nested objects and JSON-in-strings, so a
// hostile body cannot make parsing expensive.
const maxDepth = 6

func parseBody(body []byte) details {
	var d details
	if len(body) == 0 {
		return d
	}
	if v, ok := decodeJSON(body); ok {
		if m, ok := v.(map[string]any); ok {
			if s, ok := m["object"].(string); ok {
				d.object = strings.ToLower(s)
			}
		}
		d.walk(v, 0)
	}
	if len(d.messages) == 0 {
		// Plain text, or JSON in a shape not listed above.
		d.messages = append(d.messages, string(body))
	}
	return d
}

func decodeJSON(b []byte) (any, bool) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || (b[0] != '{' && b[0] != '[') {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

func (d *details) walk(v any, depth int) {
	if depth > maxDepth {
		return
	}
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			d.walk(e, depth+1)
		}
	case map[string]any:
		// Messages first, then the objects they wrap, so the order of
		// d.messages does not depend on map iteration.
		for _, key := range []string{"message", "error", "detail", "raw"} {
			val, ok := x[key]
			if !ok {
				continue
			}
			switch e := val.(type) {
			case string:
				d.addText(e, depth)
			case map[string]any, []any:
				d.walk(e, depth+1)
			}
		}
		for _, key := range []string{"errors", "metadata", "details"} {
			if val, ok := x[key]; ok {
				d.walk(val, depth+1)
			}
		}
		for _, key := range []string{"code", "type", "status", "reason", "__type"} {
			if s, ok := x[key].(string); ok && s != "" {
				d.codes = append(d.codes, strings.ToLower(s))
			}
		}
		if n, ok := number(x["n_ctx"]); ok && d.nCtx == 0 {
			d.nCtx = n
		}
		if n, ok := number(x["n_prompt_tokens"]); ok && d.nPrompt == 0 {
			d.nPrompt = n
		}
	}
}

// addText records a message; when the text is itself JSON (Ollama's
// wrapped runner errors, OpenRouter's metadata.raw) it is parsed too.
func (d *details) addText(s string, depth int) {
	if s == "" {
		return
	}
	if v, ok := decodeJSON([]byte(s)); ok {
		d.nested = true
		before := len(d.messages)
		d.walk(v, depth+1)
		if len(d.messages) > before {
			return
		}
	}
	d.messages = append(d.messages, s)
}

func number(v any) (int, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil || i < 0 || i > 1<<40 {
			return 0, false
		}
		return int(i), true
	case string:
		i, err := strconv.Atoi(n)
		return i, err == nil && i >= 0
	}
	return 0, false
}

func (d details) hasCode(codes ...string) bool {
	for _, have := range d.codes {
		for _, want := range codes {
			if have == want {
				return true
			}
		}
	}
	return false
}
