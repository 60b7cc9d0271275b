package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// SIGINT and SIGTERM stop a read that waits on a pipe: the process exits
// with 130 at once instead of waiting, or reading, forever.
func TestSignalStopsALongRead(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "--log-level", "debug", "inspect", "--context-window", "16000", "-")
			cmd.Env = append(os.Environ(), runMainEnv+"=1", "XDG_CONFIG_HOME="+dir,
				"COMPACT_HOST_CACHE_DIR="+filepath.Join(dir, "cache"), "COMPACT_HOST_PLUGINS_DIR="+filepath.Join(dir, "plugins"))
			stdin, err := cmd.StdinPipe()
			require.NoError(t, err)
			defer stdin.Close()
			stderr, err := cmd.StderrPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill() })

			// The debug line comes after the signal handlers are set and
			// just before the read starts waiting.
			lines := make(chan string, 64)
			go func() {
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			var seen []string
			timeout := time.After(time.Minute)
		wait:
			for {
				select {
				case l, ok := <-lines:
					require.True(t, ok, "stderr closed before the read started: %v", seen)
					seen = append(seen, l)
					if strings.Contains(l, "reading input") {
						break wait
					}
				case <-timeout:
					t.Fatalf("the command never started reading: %v", seen)
				}
			}
			_, err = stdin.Write([]byte(`{"id":"m1","role":"user","content":[{"type":"text","text":"hi"}]}` + "\n"))
			require.NoError(t, err)
			require.NoError(t, cmd.Process.Signal(sig))

			exited := make(chan error, 1)
			go func() {
				for l := range lines {
					seen = append(seen, l)
				}
				exited <- cmd.Wait()
			}()
			select {
			case err := <-exited:
				var ee *exec.ExitError
				require.ErrorAs(t, err, &ee)
				assert.Equal(t, 130, ee.ExitCode())
				assert.Contains(t, strings.Join(seen, "\n"), "compact-host: interrupted")
			case <-time.After(time.Minute):
				t.Fatal("the process did not exit after the signal")
			}
		})
	}
}
