package cli

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProxyRecallHint(t *testing.T) {
	for _, tc := range []struct {
		hint      string
		mcp, keep bool
		want      bool
	}{
		{"auto", true, true, true},
		{"auto", false, true, false},
		{"auto", false, false, false},
		{"on", false, true, true},
		{"off", true, true, false},
	} {
		got, err := (&proxyOptions{recallHint: tc.hint, mcp: tc.mcp, keepOriginals: tc.keep}).recallHintOn()
		require.NoError(t, err, "%+v", tc)
		assert.Equal(t, tc.want, got, "%+v", tc)
	}
	for _, args := range [][]string{{"--recall-hint", "sometimes"}, {"--mcp", "--keep-originals=false"}} {
		var stderr bytes.Buffer
		code := Main(append([]string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", t.TempDir()}, args...),
			IO{In: strings.NewReader(""), Out: io.Discard, Err: &stderr, Getenv: func(string) string { return "" }})
		assert.Equal(t, ExitUsage, code, "%v: %s", args, stderr.String())
		assert.Contains(t, stderr.String(), args[0])
	}
}
