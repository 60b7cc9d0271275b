package cli

import (
	"context"
	"fmt"
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
