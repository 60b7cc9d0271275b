package sdk_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// README.md's recipe for a new plugin module, run as written in a
// directory outside the repository: its go mod tidy must work before the
// first tag, and the plugin must build as wasm and as a process. The
// checkout it names as $CH is this repository.
func TestReadmeNewPluginModule(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("go is not on PATH: %v", err)
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	blocks := fencedBlocks(section(string(readme), "## A new plugin module"))
	require.GreaterOrEqual(t, len(blocks), 3, "README.md: want ```sh, ```go and ```sh blocks under \"## A new plugin module\"")
	setup, mainGo, build := blocks[0], blocks[1], blocks[2]
	require.Equal(t, "sh", setup.lang)
	require.Equal(t, "go", mainGo.lang)
	require.Equal(t, "sh", build.lang)

	// A hang guard for a cold module cache on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	work := t.TempDir()
	// As a user outside any workspace: the recipe must not lean on go.work.
	env := append(os.Environ(), "CH="+root, "GOWORK=off")
	sh := func(dir, script string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "in %s:\n%s\n%s", dir, script, out)
	}
	sh(work, setup.body)
	module := filepath.Join(work, "first-lines")
	require.NoError(t, os.WriteFile(filepath.Join(module, "main.go"), []byte(mainGo.body), 0o644))
	sh(module, build.body)

	gomod, err := os.ReadFile(filepath.Join(module, "go.mod"))
	require.NoError(t, err)
	assert.Contains(t, string(gomod), "github.com/compact-host/compact-host/sdk v0.0.0-00010101000000-000000000000")
	wasmFile, err := os.ReadFile(filepath.Join(module, "first-lines.wasm"))
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(wasmFile, []byte("\x00asm")), "first-lines.wasm is not a wasm module")
	assert.Contains(t, string(wasmFile), "compact_plugin_abi_v1", "the wasm build lacks the ABI's export marker")
	exe, err := os.Stat(filepath.Join(module, "first-lines"))
	require.NoError(t, err)
	assert.NotZero(t, exe.Mode()&0o111, "the process build is not executable")
	// Run by hand, without the host's cookie, the process plugin says so.
	cmd := exec.CommandContext(ctx, filepath.Join(module, "first-lines"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	assert.Error(t, err, "a process plugin started without the handshake cookie exits non-zero")
	assert.NotEmpty(t, out, "and says why")
}

type fenced struct{ lang, body string }

// section returns doc from heading to the next heading of the same level.
func section(doc, heading string) string {
	i := strings.Index(doc, heading+"\n")
	if i < 0 {
		return ""
	}
	rest := doc[i+len(heading)+1:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// fencedBlocks returns the ``` blocks of md in order.
func fencedBlocks(md string) []fenced {
	var out []fenced
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		lang, ok := strings.CutPrefix(lines[i], "```")
		if !ok {
			continue
		}
		var body strings.Builder
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			body.WriteString(lines[i] + "\n")
		}
		out = append(out, fenced{lang: lang, body: body.String()})
	}
	return out
}
