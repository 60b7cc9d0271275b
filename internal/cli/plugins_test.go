package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/internal/testwasm"
)

// A plugin file named with terminal escapes and newlines is listed with
// them escaped: it can neither clear the screen nor forge rows.
func TestPluginsListEscapesNames(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, "cache"))
	// Where the CLI keeps compiled modules without a cache_dir.
	_, err := testwasm.ShareCompiled(filepath.Join(home, "cache", "compact-host", "wazero"))
	require.NoError(t, err)
	dir := t.TempDir()
	evil := "evil\x1b[2J\x1b[H\nstructured     fake      strategy  (builtin)"
	require.NoError(t, os.WriteFile(filepath.Join(dir, evil+".plugin.json"), []byte(`{"args": []}`), 0o644))

	for _, args := range [][]string{
		{"plugins", "list", "--plugins-dir", dir},
		{"plugins", "info", "--plugins-dir", dir, evil},
	} {
		var out, errOut bytes.Buffer
		code := Main(args, IO{Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
		assert.Equal(t, ExitPlugin, code, "the broken plugin is reported: %s", errOut.String())
		for name, text := range map[string]string{"stdout": out.String(), "stderr": errOut.String()} {
			assert.NotContains(t, text, "\x1b", "%s of %s", name, args[1])
			assert.NotContains(t, text, "\nstructured     fake", "%s of %s: a forged row", name, args[1])
		}
		assert.Contains(t, out.String(), `evil\x1b[2J\x1b[H\nstructured`, args[1])
		if args[1] == "list" {
			var rows int
			for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				if strings.Contains(line, "evil") {
					rows++
				}
			}
			assert.Equal(t, 1, rows, "the evil plugin is one row")
		}
	}
}
