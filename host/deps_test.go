package host_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/compact-host/compact-host/host/internal/deplist"
)

// The engine is what an agent embeds; it must build fast and small. Plugin
// runtimes, providers and their SDKs are wired in by the caller, so none
// of them may reach package host through an import.
func TestEngineDependencies(t *testing.T) {
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
	pkgs, err := deplist.NonStandard(module + "host")
	require.NoError(t, err)
	require.Contains(t, pkgs, module+"host", "go list printed no host package: %q", pkgs)
	for _, p := range pkgs {
		for _, f := range forbidden {
			assert.False(t, deplist.Under(p, f), "package host depends on %s", p)
		}
		// Beyond the project's own packages, nothing: the exact tokenizers
		// are host/internal/tokens/bpe, with their vocabularies embedded;
		// tiktoken-go, which wrote those and checks them, is for tests only.
		assert.True(t, strings.HasPrefix(p, module), "package host depends on %s, which is not the project's", p)
	}
}
