package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README's library example must compile as written, from a module of
// its own that reaches this repository through go.work alone: the way a
// developer tries the library before it is tagged.
func TestReadmeLibraryExampleBuildsOutsideTheRepo(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	src := goBlockAfter(string(readme), "## The library in 20 lines")
	require.NotEmpty(t, src, "README.md: no ```go block under \"## The library in 20 lines\"")
	assert.Contains(t, src, "host.WithPlugins(plugins)")

	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// The repository's workspace, with its paths made absolute.
	out, err := exec.CommandContext(ctx, goBin, "work", "edit", "-json", filepath.Join(root, "go.work")).Output()
	require.NoError(t, err, "go work edit -json")
	var work struct {
		Use     []struct{ DiskPath string }
		Replace []struct {
			Old struct{ Path, Version string }
			New struct{ Path string }
		}
	}
	require.NoError(t, json.Unmarshal(out, &work))
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(root, p)
	}

	dir := t.TempDir()
	var gowork strings.Builder
	fmt.Fprintf(&gowork, "go 1.26.0\n\nuse (\n\t.\n")
	for _, u := range work.Use {
		fmt.Fprintf(&gowork, "\t%s\n", abs(u.DiskPath))
	}
	gowork.WriteString(")\n")
	for _, r := range work.Replace {
		fmt.Fprintf(&gowork, "\nreplace %s %s => %s\n", r.Old.Path, r.Old.Version, abs(r.New.Path))
	}
	files := map[string]string{
		"go.mod":   "module example.com/readme\n\ngo 1.26.0\n",
		"go.work":  gowork.String(),
		"agent.go": src,
	}
	for name, body := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"))
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build of the README example:\n%s\n%s", b, src)
}

// goBlockAfter returns the first ```go block that follows heading.
func goBlockAfter(doc, heading string) string {
	i := strings.Index(doc, heading)
	if i < 0 {
		return ""
	}
	doc = doc[i:]
	start := strings.Index(doc, "```go\n")
	if start < 0 {
		return ""
	}
	doc = doc[start+len("```go\n"):]
	end := strings.Index(doc, "```")
	if end < 0 {
		return ""
	}
	return doc[:end]
}
