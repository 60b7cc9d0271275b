package plugin

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A manifest is decoded strictly: a mistyped key is named with the key
// meant, where it used to read as a missing command ("command is empty").
func TestManifestNamesUnknownKeys(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ body, want string }{
		{`{"comand": "./p"}`, `manifest: unknown key "comand"; did you mean command? (the keys are command, args, sha256)`},
		{`{"command": "./p", "arg": ["-q"]}`, `manifest: unknown key "arg"; did you mean args?`},
		{`{"command": "./p", "checksum": "00"}`, `manifest: unknown key "checksum" (the keys are command, args, sha256)`},
		{`{"command": "./p", "args": "-q"}`, `manifest: "args": want an array, not a JSON string`},
		{`{}`, `manifest: "command" is missing or empty; name the plugin's executable, e.g. {"command": "./my-plugin"}`},
		{`{"command": "./p"} {"command": "./q"}`, `manifest: more follows the JSON object`},
		{`{"command": 5}`, `manifest: "command": want a string, not a JSON number`},
	} {
		path := filepath.Join(dir, "p.plugin.json")
		require.NoError(t, os.WriteFile(path, []byte(tc.body), 0o644))
		_, err := ReadManifest(path)
		require.Error(t, err, tc.body)
		assert.Contains(t, err.Error(), tc.want, tc.body)
		assert.True(t, errors.Is(err, ErrInvalidPlugin), tc.body)
	}
	path := filepath.Join(dir, "ok.plugin.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"command": "./p", "args": ["-q"]}`), 0o644))
	m, err := ReadManifest(path)
	require.NoError(t, err)
	assert.Equal(t, []string{"-q"}, m.Args)
}
