package storetest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// RedisServer is a redis-server process that a test started on a loopback
// port of its own, with no persistence, killed when the test ends.
type RedisServer struct {
	t    testing.TB
	port int
	dir  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartRedis starts a redis-server for t, or skips t when the binary is
// not installed (Debian package redis-server). Under CI (CI=true) a
// missing binary fails the test instead: CI installs it, so its absence
// there is a broken setup, not a reason to test less.
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		msg := "redis-server is not installed (apt-get install -y redis-server); the Redis tests need a real server"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + ", and CI=true: .ci/run installs it")
		}
		t.Skip(msg)
	}
	r := &RedisServer{t: t, dir: t.TempDir()}
	t.Cleanup(r.Kill)
	// A free port is found by listening and closing, so another process
	// may take it before redis-server binds it: try a few.
	var lastErr error
	for range 5 {
		r.port = freePort(t)
		if lastErr = r.start(); lastErr == nil {
			return r
		}
	}
	t.Fatalf("redis-server did not start: %v", lastErr)
	return nil
}

// URL is the server's address as redisstore.Open takes it, database 0.
func (r *RedisServer) URL() string { return fmt.Sprintf("redis://%s/0", r.Addr()) }

// Addr is the server's host:port.
func (r *RedisServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// Kill stops the server at once (SIGKILL, as a crash would) and waits
// for the process to end. Its data are gone: it persists nothing.
func (r *RedisServer) Kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	r.cmd.Process.Kill()
	<-r.exited
	r.cmd = nil
}

// Stop freezes the server (SIGSTOP): it keeps its connections and
// answers nothing, as a hung server would. Continue resumes it.
func (r *RedisServer) Stop() { r.signal(sigStop) }

// Continue resumes a server frozen by Stop.
func (r *RedisServer) Continue() { r.signal(sigCont) }

func (r *RedisServer) signal(sig os.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		r.cmd.Process.Signal(sig)
	}
}

// Restart starts the server again on the same port after Kill.
func (r *RedisServer) Restart() {
	r.t.Helper()
	r.Kill()
	// The kernel may hold the port for a moment after the kill.
	deadline := time.Now().Add(waitFor)
	for {
		err := r.start()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("redis-server did not restart on port %d: %v", r.port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Command sends one command to the server on a connection of its own and
// returns the raw reply, for tests that read INFO or count commands
// without going through the client under test.
func (r *RedisServer) Command(args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", r.Addr(), 2*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	var req strings.Builder
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(req.String())); err != nil {
		return "", err
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "-"):
		return "", fmt.Errorf("redis: %s", line[1:])
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 || n > 16<<20 {
			return "", fmt.Errorf("redis: bulk reply of length %q", line[1:])
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	default:
		return line[1:], nil
	}
}

// CommandCalls returns how many times the server ran cmd (lower case, as
// INFO commandstats names it) since it started or since CONFIG RESETSTAT.
func (r *RedisServer) CommandCalls(cmd string) (int, error) {
	info, err := r.Command("INFO", "commandstats")
	if err != nil {
		return 0, err
	}
	prefix := "cmdstat_" + cmd + ":calls="
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			n, _, _ := strings.Cut(rest, ",")
			return strconv.Atoi(n)
		}
	}
	return 0, nil
}

func (r *RedisServer) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	logPath := filepath.Join(r.dir, "redis.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command("redis-server",
		"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--dir", r.dir, "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--logfile", "")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(waitFor)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited: %s", tail(logPath))
		default:
		}
		if ping(r.Addr()) {
			r.cmd, r.exited = cmd, exited
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	<-exited
	return fmt.Errorf("redis-server did not answer PING within %v: %s", waitFor, tail(logPath))
}

// tail returns the end of redis-server's log, for an error message.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(bytes.TrimSpace(b))
}

func ping(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
