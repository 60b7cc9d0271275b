// Package deplist lists what a package links, for the tests that keep the
// engine and the plugin core free of the plugin runtimes and SDKs.
package deplist

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// NonStandard returns the import paths of pkg and every package it
// depends on outside the standard library, as `go list -deps` prints them.
func NonStandard(pkg string) ([]string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("the go command is needed to list the dependencies of %s: %w", pkg, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return nil, fmt.Errorf("go list -deps %s: %w: %s", pkg, err, ee.Stderr)
	} else if err != nil {
		return nil, fmt.Errorf("go list -deps %s: %w", pkg, err)
	}
	return strings.Fields(string(out)), nil
}

// Under reports whether path is pkg or a package under it.
func Under(path, pkg string) bool {
	return path == pkg || strings.HasPrefix(path, pkg+"/")
}
