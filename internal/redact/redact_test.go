package redact

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestString(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"no key", "strategy failed: 400 bad request", "strategy failed: 400 bad request"},
		{"anthropic key", `invalid x-api-key sk-ant-api03-AbCdEf123456`, `invalid x-api-key [redacted]`},
		{"openai key", "Incorrect API key provided: sk-proj-abcdefgh12345678.", "Incorrect API key provided: [redacted]."},
		{"header quoted back", `{"headers":{"x-api-key":"mysecretvalue123"}}`, `{"headers":{"x-api-key":"[redacted]"}}`},
		{"authorization header", "Authorization: Bearer abcdefghijklmnop", "Authorization: Bearer [redacted]"},
		{"bearer alone", "token bearer abc.def.ghi-jkl", "token bearer [redacted]"},
		{"gemini key", "key=AIzaSyA-1234567890abcdefghijk invalid", "key=[redacted] invalid"},
		{"short values stay", "api-key: none", "api-key: none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, String(tc.in))
		})
	}
}

func TestStringKnown(t *testing.T) {
	// A key of no known shape is hidden when the caller names it.
	require.Equal(t, "upstream said: [redacted] is not valid", String("upstream said: plainsecret42 is not valid", "plainsecret42"))
	require.Equal(t, "ollama is fine", String("ollama is fine", "ollama"), "a placeholder shorter than MinSecretLen is left")
}

func TestBytesKeepsSliceWhenClean(t *testing.T) {
	b := []byte("nothing secret here")
	require.Same(t, &b[0], &Bytes(b)[0])
	require.Equal(t, "x-api-key: [redacted]", string(Bytes([]byte("x-api-key: sk-ant-0123456789"))))
}

func TestHandlerRedactsEveryValue(t *testing.T) {
	var b strings.Builder
	log := slog.New(Handler(slog.NewTextHandler(&b, nil), "s3cret-value-1234")).With("upstream", "x-api-key: sk-ant-abcdefghijklmnop")
	log.Warn("call failed with s3cret-value-1234",
		"err", errors.New(`HTTP 401: {"error":"invalid key sk-proj-abcdefghijklmnopqrstuv"}`),
		"body", []byte("Authorization: Bearer abcdefghijklmnopqrstuvwxyz"),
		slog.Group("req", "token", "s3cret-value-1234"), "status", 401)
	out := b.String()
	for _, secret := range []string{"s3cret-value-1234", "sk-ant-abcdefghijklmnop", "sk-proj-abcdefghijklmnopqrstuv", "abcdefghijklmnopqrstuvwxyz"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log line shows %q:\n%s", secret, out)
		}
	}
	for _, kept := range []string{"status=401", "HTTP 401", "x-api-key", "req.token=" + Mask} {
		if !strings.Contains(out, kept) {
			t.Errorf("the log line lost %q:\n%s", kept, out)
		}
	}
}
