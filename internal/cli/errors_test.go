package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
)

func TestExitCodeOfEachKindOfError(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want int
	}{
		{"nil", context.Background(), nil, ExitOK},
		{"an explicit code wins", context.Background(), withCode(ExitNotFit, fmt.Errorf("over")), ExitNotFit},
		{"usage", context.Background(), usageError{fmt.Errorf("bad flag")}, ExitUsage},
		{"unknown format", context.Background(), fmt.Errorf("read: %w", formats.ErrUnknownFormat), ExitInput},
		{"bad log line", context.Background(), fmt.Errorf("open: %w", host.ErrBadEntry), ExitInput},
		{"a compaction lost to another writer's", context.Background(), fmt.Errorf("commit: %w", &host.ConflictError{Path: "s.jsonl", Line: 9, Entry: "compaction c1"}), ExitBusy},
		{"the log's lock held too long", context.Background(), fmt.Errorf("append: %w", host.ErrLogBusy), ExitBusy},
		{"the log replaced meanwhile", context.Background(), fmt.Errorf("append: %w", host.ErrLogChanged), ExitBusy},
		{"interrupted", cancelled, fmt.Errorf("anything"), ExitInterrupted},
		{"anything else", context.Background(), fmt.Errorf("boom"), ExitError},
	} {
		assert.Equal(t, tc.want, exitCode(tc.ctx, tc.err), tc.name)
	}
}

func TestStoreURLPasswordNeverPrinted(t *testing.T) {
	assert.Equal(t, "redis://:xxxxx@10.0.0.5:6379/0", redactURL("redis://:s3cret@10.0.0.5:6379/0"))
	assert.Equal(t, "redis://user:xxxxx@h:6379/0?ttl=1h", redactURL("redis://user:s3cret@h:6379/0?ttl=1h"))
	assert.Equal(t, "/var/cache/ch", redactURL("/var/cache/ch"))
	var stderr bytes.Buffer
	code := Main([]string{"proxy", "--upstream", "http://127.0.0.1:1", "--store", "redis://:s3cret@127.0.0.1:1/0?call_timeout=200ms"},
		IO{In: strings.NewReader(""), Out: io.Discard, Err: &stderr, Getenv: func(string) string { return "" }})
	assert.Equal(t, ExitInput, code, stderr.String())
	assert.Contains(t, stderr.String(), "--store")
	assert.NotContains(t, stderr.String(), "s3cret")
}
