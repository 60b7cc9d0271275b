package plugin

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/compact-host/compact-host/host/internal/pluginapi"
	"github.com/compact-host/compact-host/internal/jsontype"
	"github.com/compact-host/compact-host/internal/suggest"
)

// ManifestSuffix ends the file name of a process plugin's manifest in a
// plugins directory: "name.plugin.json".
const ManifestSuffix = ".plugin.json"

// Manifest describes a process plugin:
//
//	{"command": "./my-plugin", "args": ["--quiet"], "sha256": "9f86d0…"}
//
// A command with a path separator is relative to the manifest's directory;
// a bare name is looked up in PATH. With
// sha256 set, the executable must have that checksum or it is not started.
type Manifest struct {
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
	SHA256  string   `json:"sha256,omitempty"`
	// Path is the manifest's own path, set by ReadManifest.
	Path string `json:"-"`
}

// ReadManifest reads and checks a manifest file.
func ReadManifest(path string) (Manifest, error) {
	m, _, err := readManifest(path)
	return m, err
}

// readManifest reads and checks a manifest file, and returns its bytes.
func readManifest(path string) (Manifest, []byte, error) {
	var m Manifest
	fail := func(err error) (Manifest, []byte, error) {
		return Manifest{}, nil, &Error{Kind: ErrInvalidPlugin, Plugin: nameFromPath(path), Path: path, Op: "load", Err: err}
	}
	b, err := readRegular(path, MaxManifestBytes, "plugin.MaxManifestBytes")
	if err != nil {
		return fail(err)
	}
	if err := decodeManifest(b, &m); err != nil {
		return fail(err)
	}
	// Absolute, because the plugin's command is resolved against the
	// manifest's directory and the process also starts there.
	if m.Path, err = filepath.Abs(path); err != nil {
		return fail(err)
	}
	if _, err := m.procConfig(); err != nil {
		return fail(err)
	}
	return m, b, nil
}

func (m Manifest) procConfig() (pluginapi.ProcessConfig, error) {
	if m.Command == "" {
		return pluginapi.ProcessConfig{}, fmt.Errorf(`manifest: "command" is missing or empty; name the plugin's executable, e.g. {"command": "./my-plugin"}`)
	}
	cfg := pluginapi.ProcessConfig{Command: m.Command, Args: m.Args}
	if m.Path != "" {
		cfg.Dir = filepath.Dir(m.Path)
		if !filepath.IsAbs(m.Command) && filepath.Base(m.Command) != m.Command {
			cfg.Command = filepath.Join(cfg.Dir, m.Command)
		}
	}
	if m.SHA256 != "" {
		sum, err := hex.DecodeString(m.SHA256)
		if err != nil || len(sum) != 32 {
			return pluginapi.ProcessConfig{}, fmt.Errorf("manifest: sha256 %q is not 64 hex digits", m.SHA256)
		}
		cfg.Checksum = sum
	}
	return cfg, nil
}

// manifestKeys are the keys a manifest may hold.
var manifestKeys = []string{"command", "args", "sha256"}

// decodeManifest decodes b strictly: a mistyped key ("comand") is named,
// with the key meant, rather than read as a missing one.
func decodeManifest(b []byte, m *Manifest) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(m)
	if err == nil && dec.More() {
		err = errors.New("more follows the JSON object")
	}
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("manifest: %q: want %s, not a JSON %s", te.Field, jsontype.Expected(te), te.Value)
	}
	if key, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		key, _ = strconv.Unquote(key)
		return fmt.Errorf("manifest: unknown key %q%s (the keys are %s)", key, suggest.Hint(key, manifestKeys), strings.Join(manifestKeys, ", "))
	}
	return fmt.Errorf("manifest: %w", err)
}
