// Package builtin holds the built-in plugins as wasm modules embedded in the
// host binary, so a fresh install works with no plugins directory. The
// modules are built from plugins/<name>/cmd/<name> by `make plugins`; only
// package host/plugin/wasm imports this one (wasm.Builtins), so a program
// that does not wire in the wasm runtime does not carry them.
package builtin

import (
	"embed"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// The directory, not a *.wasm pattern: a pattern matching nothing is a
// compile error, and the package must build before any plugin exists.
//
//go:embed wasm
var modules embed.FS

// Names lists the built-in plugins, sorted: the names of the embedded
// modules without their .wasm extension.
func Names() []string {
	entries, _ := fs.ReadDir(modules, "wasm")
	var names []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".wasm"); ok && !e.IsDir() {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// Wasm returns the module of the named built-in plugin. The bytes are the
// binary's own and must not be modified.
func Wasm(name string) ([]byte, bool) {
	b, err := modules.ReadFile(path.Join("wasm", name+".wasm"))
	return b, err == nil
}
