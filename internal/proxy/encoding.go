package proxy

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Codex compresses its Responses requests with zstd when it signs in with
// a ChatGPT account; a body the proxy cannot read goes on untouched, so
// it reads the encodings agents send.

// errEncoding is a Content-Encoding the proxy does not read.
var errEncoding = errors.New("the proxy does not read this Content-Encoding")

// contentEncoding is the request's Content-Encoding, "" for none.
func contentEncoding(h http.Header) string {
	e := strings.ToLower(strings.TrimSpace(h.Get("Content-Encoding")))
	if e == "identity" {
		return ""
	}
	return e
}

// decodeBody returns the body data encoded by enc (zstd or gzip), at most
// limit bytes of it: a larger body is an error, whatever ratio the
// encoding reached.
func decodeBody(enc string, data []byte, limit int64) ([]byte, error) {
	var r io.Reader
	switch enc {
	case "zstd":
		// One goroutine and a window no larger than the limit: a small
		// body cannot claim more memory than a plain one may use.
		d, err := zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxWindow(uint64(max(limit, zstd.MinWindowSize))), zstd.WithDecoderMaxMemory(uint64(limit)))
		if err != nil {
			return nil, err
		}
		defer d.Close()
		r = d
	case "gzip", "x-gzip":
		z, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		r = z
	default:
		return nil, fmt.Errorf("%w (%q)", errEncoding, enc)
	}
	plain, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(plain)) > limit {
		return nil, fmt.Errorf("the decoded body is over the %d-byte limit", limit)
	}
	return plain, nil
}
