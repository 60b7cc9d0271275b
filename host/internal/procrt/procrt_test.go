package procrt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/pluginapi"
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
		for _, n := range []string{"testplug", "nohandshake"} {
			out, err := exec.Command("go", "build", "-ldflags", "-X main.hostile=yes", "-o", filepath.Join(binDir, n), "../../plugin/testdata/"+n).CombinedOutput()
			if err != nil {
				buildErr = errors.New(string(out))
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
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

func start(t testing.TB, cfg Config) *Plugin {
	t.Helper()
	p, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
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
	p := start(t, Config{Command: binary(t, "testplug"), Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if info := p.Info(); info.Name != "testplug" || info.ABIMajor != abi.Major {
		t.Fatalf("info = %+v", info)
	}
	resp, err := truncate(context.Background(), p, fakeModel{}, "callhost", []byte("the input"), 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.Content); got != "model saw the input" {
		t.Fatalf("callhost = %q", got)
	}
	if !strings.Contains(logs.String(), "calling the host model") {
		t.Fatalf("the plugin's Host.Log line is not in the host log:\n%s", logs)
	}
	// Large content crosses in both directions: over gRPC's 4 MiB default.
	big := bytes.Repeat([]byte("0123456789abcdef"), 20<<20/16)
	resp, err = truncate(context.Background(), p, nil, "generic", big, len(big))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(resp.Content, big) {
		t.Fatalf("20 MiB round trip returned %d bytes", len(resp.Content))
	}
}

func TestCrashMidCallThenRestart(t *testing.T) {
	p := start(t, Config{Command: binary(t, "testplug")})
	_, err := truncate(context.Background(), p, nil, "exit", []byte("x"), 10)
	if !errors.Is(err, pluginapi.ErrCrash) {
		t.Fatalf("err = %v, want ErrCrash", err)
	}
	resp, err := truncate(context.Background(), p, nil, "generic", []byte("again"), 10)
	if err != nil || string(resp.Content) != "again" {
		t.Fatalf("call after the crash: %v %v", resp, err)
	}
}

func TestDeadlineKillsTheProcess(t *testing.T) {
	p := start(t, Config{Command: binary(t, "testplug")})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := truncate(ctx, p, nil, "spin", []byte("x"), 10)
	if !errors.Is(err, pluginapi.ErrDeadlineExceeded) {
		t.Fatalf("err = %v, want ErrDeadlineExceeded", err)
	}
	if _, err := truncate(context.Background(), p, nil, "generic", []byte("x"), 10); err != nil {
		t.Fatalf("call after the deadline: %v", err)
	}
}

func TestHandshakeNeverCompletes(t *testing.T) {
	logs := &logBuffer{}
	_, err := Start(context.Background(), Config{
		Command:          binary(t, "nohandshake"),
		HandshakeTimeout: 300 * time.Millisecond,
		Logger:           slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if !errors.Is(err, pluginapi.ErrHandshake) {
		t.Fatalf("err = %v, want ErrHandshake", err)
	}
	if !strings.Contains(logs.String(), "will never complete the handshake") {
		t.Errorf("the plugin's stderr is not in the host log:\n%s", logs)
	}
}

func TestChecksumPinning(t *testing.T) {
	path := binary(t, "testplug")
	bin, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bin)
	start(t, Config{Command: path, Checksum: sum[:]})

	sum[0] ^= 0xff
	_, err = Start(context.Background(), Config{Command: path, Checksum: sum[:]})
	if !errors.Is(err, pluginapi.ErrHandshake) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("err = %v, want ErrHandshake about the checksum", err)
	}
}

func TestPluginDoesNotSeeHostEnvironment(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-secret")
	env := minimalEnv()
	for _, kv := range env {
		if strings.Contains(kv, "sk-secret") {
			t.Fatalf("minimal environment carries %q", kv)
		}
	}
}
