package procrt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/pluginapi"
	"github.com/compact-host/compact-host/internal/proctest"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binary builds a test program of host/plugin/testdata into a temporary
// directory shared by the tests of this package.
func binary(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "procrt")
		if buildErr != nil {
			return
		}
		for _, n := range []string{"testplug", "nohandshake", "infohang"} {
			out, err := exec.Command("go", "build", "-ldflags", "-X main.hostile=yes", "-o", filepath.Join(binDir, n), "../../plugin/testdata/"+n).CombinedOutput()
			if err != nil {
				buildErr = errors.New(string(out))
				return
			}
		}
	})
	require.NoError(t, buildErr)
	return filepath.Join(binDir, name)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// logBuffer collects the host log of a test.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func start(t testing.TB, cfg Config) *Plugin {
	t.Helper()
	p, err := Start(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// within runs f and fails the test if it has not returned after a
// generous bound: a hang guard for code that used to hang, not a timing
// requirement.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		require.FailNow(t, what+" did not return")
	}
}

func truncate(ctx context.Context, p *Plugin, svc pluginapi.Services, category string, content []byte, maxTokens int) (*abi.TruncateResponse, error) {
	frame, err := abi.Encode(&abi.TruncateRequest{Category: category, Content: content, MaxTokens: maxTokens})
	if err != nil {
		return nil, err
	}
	out, err := p.Call(ctx, svc, abi.ExportTruncate, frame)
	if err != nil {
		return nil, err
	}
	var resp abi.TruncateResponse
	return &resp, abi.Decode(out, &resp)
}

type fakeModel struct{ pluginapi.Offline }

func (fakeModel) Complete(_ context.Context, req *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	return &abi.CompleteResponse{Text: "model saw " + req.Messages[0].Content[0].Text}, nil
}

func TestRoundTripAndHostCalls(t *testing.T) {
	logs := &logBuffer{}
	p := start(t, Config{Command: binary(t, "testplug"), Logger: logs.logger()})
	assert.Equal(t, "testplug", p.Info().Name)
	assert.Equal(t, abi.Major, p.Info().ABIMajor)
	resp, err := truncate(context.Background(), p, fakeModel{}, "callhost", []byte("the input"), 10)
	require.NoError(t, err)
	assert.Equal(t, "model saw the input", string(resp.Content))
	assert.Contains(t, logs.String(), "calling the host model", "the plugin's Host.Log line is in the host log")
	// Large content crosses in both directions: over gRPC's 4 MiB default.
	big := bytes.Repeat([]byte("0123456789abcdef"), 20<<20/16)
	resp, err = truncate(context.Background(), p, nil, "generic", big, len(big))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(resp.Content, big), "20 MiB round trip returned %d bytes", len(resp.Content))
}

func TestCrashMidCallThenRestart(t *testing.T) {
	p := start(t, Config{Command: binary(t, "testplug")})
	_, err := truncate(context.Background(), p, nil, "exit", []byte("x"), 10)
	assert.ErrorIs(t, err, pluginapi.ErrCrash)
	resp, err := truncate(context.Background(), p, nil, "generic", []byte("again"), 10)
	require.NoError(t, err, "call after the crash")
	assert.Equal(t, "again", string(resp.Content))
}

func TestDeadlineKillsTheProcess(t *testing.T) {
	p := start(t, Config{Command: binary(t, "testplug")})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := truncate(ctx, p, nil, "spin", []byte("x"), 10)
	assert.ErrorIs(t, err, pluginapi.ErrDeadlineExceeded)
	assert.NotErrorIs(t, err, pluginapi.ErrCrash)
	_, err = truncate(context.Background(), p, nil, "generic", []byte("x"), 10)
	assert.NoError(t, err, "call after the deadline")
}

// lateCtx is a context whose deadline has passed but whose timer has not
// fired: on a loaded machine gRPC reads the deadline (or gets the
// plugin's RST_STREAM at it) and fails the call in that window, with
// ctx.Err() still nil. That is how TestDeadlineKillsTheProcess used to
// see "plugin process crashed: ... DeadlineExceeded ... RST_STREAM".
type lateCtx struct{ context.Context }

func (lateCtx) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

func TestDeadlineSeenByGRPCFirstIsADeadline(t *testing.T) {
	p := start(t, Config{Command: binary(t, "testplug")})
	_, err := truncate(lateCtx{context.Background()}, p, nil, "generic", []byte("x"), 10)
	assert.ErrorIs(t, err, pluginapi.ErrDeadlineExceeded)
	assert.NotErrorIs(t, err, pluginapi.ErrCrash)
	_, err = truncate(context.Background(), p, nil, "generic", []byte("x"), 10)
	assert.NoError(t, err)
}

func TestInfoThatNeverAnswersFailsAtTheDeadline(t *testing.T) {
	path := binary(t, "infohang")
	var err error
	within(t, "Start of a plugin whose Info never answers", func() {
		_, err = Start(context.Background(), Config{Command: path, HandshakeTimeout: 500 * time.Millisecond})
	})
	assert.ErrorIs(t, err, pluginapi.ErrDeadlineExceeded)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path, "the error names the file")
}

func TestCallWithoutADeadlineIsBounded(t *testing.T) {
	p := start(t, Config{Command: binary(t, "testplug"), CallTimeout: 300 * time.Millisecond})
	var err error
	within(t, "a spinning call without a deadline", func() {
		_, err = truncate(context.Background(), p, nil, "spin", []byte("x"), 10)
	})
	assert.ErrorIs(t, err, pluginapi.ErrDeadlineExceeded)
}

// alive reports whether pid is a process that has not exited; a zombie
// waiting for its parent to reap it has exited.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces, state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestChildrenDieWithThePlugin(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	p, err := Start(context.Background(), Config{Command: binary(t, "testplug")})
	require.NoError(t, err)
	resp, err := truncate(context.Background(), p, nil, "fork", []byte("x"), 10)
	require.NoError(t, err)
	child, err := strconv.Atoi(string(resp.Content))
	require.NoError(t, err)
	t.Cleanup(func() {
		if alive(child) {
			_ = killProcess(child)
		}
	})
	require.True(t, alive(child), "precondition: the plugin's child runs")

	within(t, "Close", p.Close)
	deadline := time.Now().Add(20 * time.Second)
	for alive(child) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	assert.False(t, alive(child), "the plugin's child %d outlived the plugin", child)
}

func killProcess(pid int) error {
	proc, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return proc.Kill()
}

func TestHostIsNotDumpableOnceAPluginStarts(t *testing.T) {
	start(t, Config{Command: binary(t, "testplug")})
	dumpable, err := hostDumpable()
	require.NoError(t, err)
	assert.False(t, dumpable, "PR_GET_DUMPABLE after a process plugin started")
	if os.Geteuid() == 0 {
		// Root reads any process's environ, dumpable or not: the flag is
		// what can be checked here.
		t.Log("running as root: checked the dumpable flag only")
		return
	}
	err = exec.Command("cat", fmt.Sprintf("/proc/%d/environ", os.Getpid())).Run()
	assert.Error(t, err, "a process of the same user read the host's environment")
}

func TestStderrFloodIsBounded(t *testing.T) {
	logs := &logBuffer{}
	p := start(t, Config{Command: binary(t, "testplug"), Logger: logs.logger()})
	const lines = 3 * pluginapi.MaxStreamLines // 100 bytes each
	_, err := truncate(context.Background(), p, nil, "stderrflood", []byte("x"), lines)
	require.NoError(t, err)
	within(t, "Close", p.Close)
	got := logs.String()
	assert.LessOrEqual(t, strings.Count(got, strings.Repeat("E", 99)), pluginapi.MaxStreamLines)
	assert.Equal(t, 1, strings.Count(got, "lines of plugin log dropped"), "one note of the dropped lines")
}

func TestHostLogFloodIsBoundedPerCall(t *testing.T) {
	logs := &logBuffer{}
	p := start(t, Config{Command: binary(t, "testplug"), Logger: logs.logger()})
	budget := pluginapi.NewCallLogBudget()
	ctx := pluginapi.WithLogBudget(context.Background(), budget)
	const lines = pluginapi.MaxLogLinesPerCall + 2000
	_, err := truncate(ctx, p, nil, "logflood", []byte("x"), lines)
	require.NoError(t, err)
	assert.Equal(t, pluginapi.MaxLogLinesPerCall, strings.Count(logs.String(), strings.Repeat("L", 100)))
	_, dropped := budget.Dropped()
	assert.Equal(t, 2000, dropped)
}

func TestHandshakeNeverCompletes(t *testing.T) {
	logs := &logBuffer{}
	_, err := Start(context.Background(), Config{
		Command:          binary(t, "nohandshake"),
		HandshakeTimeout: 300 * time.Millisecond,
		Logger:           logs.logger(),
	})
	assert.ErrorIs(t, err, pluginapi.ErrHandshake)
	assert.ErrorIs(t, err, pluginapi.ErrDeadlineExceeded, "a handshake out of time is a deadline")
	assert.Contains(t, logs.String(), "will never complete the handshake", "the plugin's stderr is in the host log")
}

func TestChecksumPinning(t *testing.T) {
	path := binary(t, "testplug")
	bin, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(bin)
	start(t, Config{Command: path, Checksum: sum[:]})

	sum[0] ^= 0xff
	_, err = Start(context.Background(), Config{Command: path, Checksum: sum[:]})
	assert.ErrorIs(t, err, pluginapi.ErrHandshake)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "checksum")
}

func TestPluginDoesNotSeeHostEnvironment(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-secret")
	for _, kv := range minimalEnv() {
		assert.NotContains(t, kv, "sk-secret")
	}
}

func TestCommandThatIsNotARegularFileIsRefused(t *testing.T) {
	sum := sha256.Sum256(nil)
	var err error
	within(t, "Start of /dev/zero with a checksum", func() {
		_, err = Start(context.Background(), Config{Command: "/dev/zero", Checksum: sum[:]})
	})
	assert.ErrorIs(t, err, pluginapi.ErrInvalidPlugin)
}

// A child that left the plugin's process group and holds its stderr
// survives the plugin (it is trusted code's own doing), but closing the
// plugin does not wait for it.
func TestCloseDoesNotWaitForAChildThatEscaped(t *testing.T) {
	p, err := Start(context.Background(), Config{Command: binary(t, "testplug")})
	require.NoError(t, err)
	resp, err := truncate(context.Background(), p, nil, "escape", []byte("x"), 10)
	require.NoError(t, err)
	child, err := strconv.Atoi(string(resp.Content))
	require.NoError(t, err)
	t.Cleanup(func() { _ = killProcess(child) })
	within(t, "Close", p.Close)
}

// Closing a plugin stops its process; go-plugin reports that exit as an
// error, which is the host's own doing and is logged at debug level. The
// same report for a process that was not being stopped stays an error.
func TestCloseLogsNoError(t *testing.T) {
	logs := &logBuffer{}
	p, err := Start(context.Background(), Config{Command: binary(t, "testplug"), Logger: logs.logger()})
	require.NoError(t, err)
	_, err = truncate(context.Background(), p, nil, "generic", []byte("x"), 10)
	require.NoError(t, err)
	within(t, "Close", p.Close)
	assert.NotContains(t, logs.String(), "level=ERROR", logs.String())

	for _, killing := range []bool{false, true} {
		logs := &logBuffer{}
		w := &slogWriter{logger: logs.logger(), budget: pluginapi.NewStreamLogBudget()}
		w.killing.Store(killing)
		_, err := w.Write([]byte(`{"@level":"error","@message":"plugin process exited","error":"signal: killed"}` + "\n"))
		require.NoError(t, err)
		want := map[bool]string{false: "level=ERROR", true: "level=DEBUG"}[killing]
		assert.Contains(t, logs.String(), want+` msg="plugin process exited"`, "killing %v", killing)
	}
}

// A plugin whose interpreter lacks a module dies before its handshake.
// The error shows what it wrote on stderr, line by line, where it used to
// hold go-plugin's advice about architectures and the cause only in the
// debug log.
func TestStartErrorShowsTheStderrTail(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "plugin.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n"+
		"echo 'Traceback (most recent call last):' >&2\n"+
		"echo '  File \"plugin.py\", line 1, in <module>' >&2\n"+
		"echo \"ModuleNotFoundError: No module named 'compact_host_sdk'\" >&2\n"+
		"exit 1\n"), 0o755))
	_, err := Start(context.Background(), Config{Command: script, HandshakeTimeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	require.ErrorIs(t, err, pluginapi.ErrHandshake)
	msg := err.Error()
	assert.Contains(t, msg, "the process ended without printing its handshake line on stdout; its stderr ended with:\n"+
		"    Traceback (most recent call last):\n"+
		"      File \"plugin.py\", line 1, in <module>\n"+
		"    ModuleNotFoundError: No module named 'compact_host_sdk'")
	assert.NotContains(t, msg, `\n`, "no escaped newlines")
	assert.NotContains(t, msg, "This usually means")

	// A plugin that prints something else first is named by that line.
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho hello\nexit 1\n"), 0o755))
	_, err = Start(context.Background(), Config{Command: script, HandshakeTimeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	require.ErrorIs(t, err, pluginapi.ErrHandshake)
	assert.Contains(t, err.Error(), `the process's first line on stdout, "hello", is not a go-plugin handshake`)
}

// The tail is bounded, and cut at a line.
func TestStderrTailIsBounded(t *testing.T) {
	var tail stderrTail
	for i := range 1000 {
		fmt.Fprintf(&tail, "line %d\n", i)
	}
	text := tail.text()
	assert.Less(t, len(text), 2*maxStderrTail, "the tail, indented")
	assert.Contains(t, text, "\n    line 999")
	assert.Contains(t, text, "ended with:\n    …\n    line ")
}

// A caller that gives up while the plugin hangs before its handshake (the
// registry closing, serve stopping) gets its answer at once, and the
// process is killed and reaped, not left running until the handshake
// timeout, or for ever once the host has exited.
func TestGivingUpDuringTheHandshakeKillsTheProcess(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Start(ctx, Config{
			Command: binary(t, "nohandshake"), Args: []string{pidFile},
			HandshakeTimeout: time.Hour,
		})
		done <- err
	}()
	pid := proctest.ReadPID(t, pidFile, time.Minute)
	cancel()
	var err error
	within(t, "Start after its context ended", func() { err = <-done })
	require.ErrorIs(t, err, pluginapi.ErrHandshake)
	assert.ErrorIs(t, err, context.Canceled)
	proctest.RequireGone(t, pid, time.Minute)
}
