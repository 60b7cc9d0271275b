package suggest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClose(t *testing.T) {
	names := []string{"structured", "narrative", "truncate", "context_window", "keep_recent_tokens"}
	assert.Equal(t, []string{"structured"}, Close("structurd", names))
	assert.Equal(t, []string{"narrative"}, Close("NARATIVE", names), "case does not count")
	assert.Equal(t, []string{"keep_recent_tokens"}, Close("keep_recent", names), "a prefix of three letters or more")
	assert.Empty(t, Close("ab", []string{"abcdef"}), "a short prefix is no hint")
	assert.Empty(t, Close("truncate", names), "the name itself is no suggestion")
	assert.Empty(t, Close(strings.Repeat("x", 10_000), names), "a long name is not compared")
	assert.Equal(t, "; did you mean context_window?", Hint("contxt_window", names))
	assert.Equal(t, "", Hint("zzz", names))
}
