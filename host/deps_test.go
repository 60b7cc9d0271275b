package host_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The engine is what an agent embeds; it must build fast and small. Plugin
// runtimes, providers and their SDKs are wired in by the caller, so none
// of them may reach package host through an import.
func TestEngineDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command is needed to list the package's dependencies")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "go list -deps: %s", stderr)

	const module = "github.com/compact-host/compact-host/"
	forbidden := []string{
		"github.com/tetratelabs/wazero",
		"github.com/hashicorp/go-plugin",
		"google.golang.org/grpc",
		"github.com/anthropics/anthropic-sdk-go",
		"github.com/openai/openai-go",
		module + "host/plugin",
		module + "host/provider",
		module + "host/internal/wasmrt",
		module + "host/internal/procrt",
		module + "sdk",
	}
	// Beyond the project's own packages, only the tokenizer and the regexp
	// engine it uses.
	thirdParty := []string{"github.com/tiktoken-go/tokenizer", "github.com/dlclark/regexp2"}

	pkgs := strings.Fields(string(out))
	require.Contains(t, pkgs, module+"host", "go list printed no host package: %q", out)
	for _, p := range pkgs {
		for _, f := range forbidden {
			assert.False(t, p == f || strings.HasPrefix(p, f+"/"), "package host depends on %s", p)
		}
		if strings.HasPrefix(p, module) {
			continue
		}
		allowed := false
		for _, a := range thirdParty {
			allowed = allowed || p == a || strings.HasPrefix(p, a+"/")
		}
		assert.True(t, allowed, "package host depends on %s, which is neither the project's nor the tokenizer's", p)
	}
}
