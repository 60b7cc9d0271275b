package pluginapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
)

// lateCtx is a context whose deadline has passed but whose timer has not
// fired yet: what a transport that reads the deadline itself sees a moment
// before ctx.Err() is set, on a loaded machine.
type lateCtx struct{ context.Context }

func (lateCtx) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

func TestContextErrSeesAPassedDeadlineBeforeTheTimer(t *testing.T) {
	ctx := lateCtx{context.Background()}
	require.NoError(t, ctx.Err(), "precondition: the context's timer has not fired")
	assert.ErrorIs(t, ContextErr(ctx), context.DeadlineExceeded)
	assert.NoError(t, ContextErr(context.Background()))
	live, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	assert.NoError(t, ContextErr(live))
	cancel()
	assert.ErrorIs(t, ContextErr(live), context.Canceled)
}

// failingModel fails the way a provider's HTTP client does when the
// deadline passes: with text, not a wrapped context error.
type failingModel struct{ Offline }

func (failingModel) Complete(context.Context, *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	return nil, errors.New("provider: Post \"http://127.0.0.1/v1/messages\": i/o timeout")
}

func TestHostCallPastTheDeadlineIsADeadline(t *testing.T) {
	frame, err := abi.Encode(&abi.CompleteRequest{Messages: []abi.Message{{Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "hi"}}}}})
	require.NoError(t, err)

	out := ServeHostCall(lateCtx{context.Background()}, failingModel{}, abi.OpComplete, frame)
	var abiErr *abi.Error
	require.ErrorAs(t, abi.Decode(out, &abi.CompleteResponse{}), &abiErr)
	assert.Equal(t, abi.CodeDeadline, abiErr.Code, "a model failure after the deadline is the deadline: %v", abiErr)

	out = ServeHostCall(context.Background(), failingModel{}, abi.OpComplete, frame)
	require.ErrorAs(t, abi.Decode(out, &abi.CompleteResponse{}), &abiErr)
	assert.Equal(t, abi.CodeModel, abiErr.Code, "before the deadline it is the model's failure: %v", abiErr)
}

func TestCallLogBudgetDropsPastItsLimitWithOneNote(t *testing.T) {
	var out bytes.Buffer
	logger := BudgetLogger(slog.New(slog.NewTextHandler(&out, nil)))
	b := NewCallLogBudget()
	ctx := WithLogBudget(context.Background(), b)
	const lines = MaxLogLinesPerCall + 500
	for i := range lines {
		logger.Log(ctx, slog.LevelInfo, fmt.Sprintf("line %d", i))
	}
	logger.Info("a line of the host's own")
	b.Flush(logger)

	got := out.String()
	assert.Equal(t, MaxLogLinesPerCall+2, strings.Count(got, "\n"), "the lines within the limit, the host's line and one note")
	assert.Contains(t, got, "a line of the host's own")
	assert.Equal(t, 1, strings.Count(got, "lines of plugin log dropped"))
	assert.Contains(t, got, "500 lines of plugin log dropped")
	bytesDropped, linesDropped := b.Dropped()
	assert.Zero(t, bytesDropped+linesDropped, "the note resets the count")
}

func TestCallLogBudgetBoundsBytes(t *testing.T) {
	var out bytes.Buffer
	logger := BudgetLogger(slog.New(slog.NewTextHandler(&out, nil)))
	b := NewCallLogBudget()
	ctx := WithLogBudget(context.Background(), b)
	line := strings.Repeat("x", 4<<10)
	for range 1000 { // 4 MiB against a 1 MiB limit
		logger.Log(ctx, slog.LevelInfo, line)
	}
	assert.LessOrEqual(t, out.Len(), MaxLogBytesPerCall+256*(MaxLogBytesPerCall/len(line)), "at most the limit plus each line's attributes")
	bytesDropped, _ := b.Dropped()
	assert.Greater(t, bytesDropped, 2<<20)
}

func TestLineWriterBoundsAStream(t *testing.T) {
	var out bytes.Buffer
	w := &LineWriter{Logger: slog.New(slog.NewTextHandler(&out, nil))}
	line := []byte(strings.Repeat("y", 1023) + "\n")
	for range 4096 { // 4 MiB in one window
		_, err := w.Write(line)
		require.NoError(t, err)
	}
	w.Flush()
	assert.Less(t, out.Len(), 2*MaxStreamBytes)
	assert.Equal(t, 1, strings.Count(out.String(), "lines of plugin log dropped"))
}

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"structured":                  "structured",
		"naïve – plugin":              "naïve – plugin",
		"evil\x1b[2J\x1b[H":           `evil\x1b[2J\x1b[H`,
		"two\nlines\r":                `two\nlines\r`,
		"rtl\u202eexe.wasm":           `rtl\u202eexe.wasm`,
		"bad\xffutf8":                 `bad\xffutf8`,
		"bell\a and tab\tand nul\x00": `bell\a and tab\tand nul\x00`,
	} {
		assert.Equal(t, want, Escape(in), "%q", in)
	}
}

func TestErrorMessageIsEscaped(t *testing.T) {
	err := &Error{Kind: ErrPluginError, Plugin: "x\x1b[2J", Path: "/p/x\n.wasm", Op: "truncate", Err: errors.New("line one\nFAKE line\x1b[31m")}
	msg := err.Error()
	assert.NotContains(t, msg, "\x1b")
	assert.NotContains(t, msg, "\n")
	assert.Contains(t, msg, `line one\nFAKE line\x1b[31m`)
}
