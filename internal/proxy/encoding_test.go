package proxy

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func zstdOf(t testing.TB, b []byte) []byte {
	enc, err := zstd.NewWriter(nil)
	require.NoError(t, err)
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

// TestZstdRequestBodies: Codex signed in with ChatGPT sends its requests
// zstd-compressed; the proxy gates what they hold.
func TestZstdRequestBodies(t *testing.T) {
	zpost := func(t *testing.T, r *rig, body []byte, encoding string) {
		resp, data := post(t, r.srv.URL+"/v1/responses", body, map[string]string{"Content-Encoding": encoding})
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
	}
	t.Run("unchanged goes as sent", func(t *testing.T) {
		r := newRig(t, nil)
		z := zstdOf(t, codexBody(t, 2, false, nil))
		zpost(t, r, z, "zstd")
		other := r.up.otherRequests()
		require.Len(t, other, 1)
		assert.Equal(t, z, other[0].Body)
		assert.Equal(t, "zstd", other[0].Header.Get("Content-Encoding"))
		assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="forwarded",kind="responses"`))
	})
	t.Run("compacted goes plain", func(t *testing.T) {
		r := newRig(t, nil)
		plain := codexBody(t, 12, false, nil)
		zpost(t, r, zstdOf(t, plain), "zstd")
		got := r.up.agentRequests()
		require.Len(t, got, 1, "the upstream got a plain JSON body")
		assert.Empty(t, got[0].Header.Get("Content-Encoding"))
		require.NotNil(t, checkFaithfulIn(t, "input", plain, got[0].Body))
		checkResponsesInput(t, got[0].Body)
	})
	t.Run("a bomb goes untouched", func(t *testing.T) {
		r := newRig(t, func(o *Options) { o.MaxBodyBytes = 64 << 10 })
		plain := []byte(`{"model":"gpt-5-codex","input":[{"role":"user","content":"` + strings.Repeat("a", 8<<20) + `"}]}`)
		z := zstdOf(t, plain)
		require.Less(t, len(z), 64<<10, "the compressed body is under the limit")
		zpost(t, r, z, "zstd")
		other := r.up.otherRequests()
		require.Len(t, other, 1)
		assert.True(t, bytes.Equal(z, other[0].Body))
		assert.Equal(t, 1.0, metricValue(t, r.srv.URL, `compact_host_proxy_requests_total{action="undecoded",kind="responses"`))
	})
	t.Run("an unknown encoding goes untouched", func(t *testing.T) {
		r := newRig(t, nil)
		zpost(t, r, []byte("not brotli"), "br")
		other := r.up.otherRequests()
		require.Len(t, other, 1)
		assert.Equal(t, "not brotli", string(other[0].Body))
		assert.Equal(t, "br", other[0].Header.Get("Content-Encoding"))
		assert.Contains(t, r.logs.String(), "could not decode")
	})
}
