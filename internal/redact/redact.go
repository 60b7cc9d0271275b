// Package redact hides credentials in text the program writes: log lines,
// errors, and upstream bodies quoted back. One function serves the CLI,
// serve and the proxy, so a form of credential learnt once is hidden
// everywhere.
package redact

import (
	"regexp"
	"strings"
)

// Mask replaces a hidden credential.
const Mask = "[redacted]"

// MinSecretLen: shorter values are placeholders for local servers
// ("ollama", "none") and are not worth garbling text over.
const MinSecretLen = 8

// keyPatterns match credentials by their shape, for keys the caller does
// not know (another client's, one quoted back in a different spelling):
// provider key prefixes, and the values of the headers that carry keys.
var keyPatterns = regexp.MustCompile(
	`(?i)(?:\b(?:sk|rk|pk)-[A-Za-z0-9_\-]{8,}|\bAIza[0-9A-Za-z_\-]{20,}|\bgsk_[A-Za-z0-9]{16,}|\bxai-[A-Za-z0-9]{16,})` +
		`|(?i:\bbearer\s+)[A-Za-z0-9._~+/=\-]{8,}` +
		`|(?i:\b(?:x-api-key|x-goog-api-key|api-key|authorization)\b["']?\s*[:=]\s*["']?(?:bearer\s+)?)[^\s"',;}]{8,}`)

// String returns s with every known secret and every credential-shaped
// token replaced by Mask.
func String(s string, known ...string) string {
	for _, k := range known {
		if len(k) >= MinSecretLen && strings.Contains(s, k) {
			s = strings.ReplaceAll(s, k, Mask)
		}
	}
	if !mayHoldKey(s) {
		return s
	}
	return keyPatterns.ReplaceAllStringFunc(s, maskValue)
}

// Bytes is String for a byte slice; b is returned as is when nothing in it
// is hidden.
func Bytes(b []byte, known ...string) []byte {
	s := string(b)
	if r := String(s, known...); r != s {
		return []byte(r)
	}
	return b
}

// maskValue keeps a header name or scheme that the match starts with, so
// the text still says which header carried the hidden value.
func maskValue(m string) string {
	lower := strings.ToLower(m)
	for _, lead := range []string{"bearer ", "bearer\t"} {
		if i := strings.LastIndex(lower, lead); i >= 0 {
			return m[:i+len(lead)] + Mask
		}
	}
	if i := strings.IndexAny(m, ":="); i >= 0 && strings.ContainsAny(lower[:i], "abcdefghijklmnopqrstuvwxyz") && !strings.HasPrefix(lower, "sk-") {
		j := i + 1
		for j < len(m) && (m[j] == ' ' || m[j] == '"' || m[j] == '\'') {
			j++
		}
		return m[:j] + Mask
	}
	return Mask
}

// mayHoldKey is a cheap filter before the regular expression: most log
// lines hold none of the markers.
func mayHoldKey(s string) bool {
	l := strings.ToLower(s)
	for _, marker := range []string{"sk-", "rk-", "pk-", "aiza", "gsk_", "xai-", "bearer", "api-key", "authorization"} {
		if strings.Contains(l, marker) {
			return true
		}
	}
	return false
}
