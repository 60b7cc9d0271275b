package tenant

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOfSeparatesCredentialsAndSecrets(t *testing.T) {
	a, err := NewKeyer([]byte("0123456789abcdef-one"))
	require.NoError(t, err)
	b, err := NewKeyer([]byte("0123456789abcdef-two"))
	require.NoError(t, err)

	require.Equal(t, a.Of("sk-ant-key-1"), a.Of("sk-ant-key-1"), "one credential, one tenant")
	require.NotEqual(t, a.Of("sk-ant-key-1"), a.Of("sk-ant-key-2"))
	require.NotEqual(t, a.Of("sk-ant-key-1"), b.Of("sk-ant-key-1"), "the tenant depends on the secret")
	require.Equal(t, Anonymous, a.Of(""))
	require.NotContains(t, string(a.Of("sk-ant-key-1")), "key-1")
	require.True(t, strings.HasPrefix(string(a.Of("x")), "t-"))
	require.NotEqual(t, Anonymous, a.Of(string(Anonymous)), "a credential spelled like the anonymous tenant is still keyed")
}

func TestSecretsAreChecked(t *testing.T) {
	_, err := NewKeyer([]byte("short"))
	require.ErrorContains(t, err, "at least 16")

	dir := t.TempDir()
	p := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(p, []byte("tiny\n"), 0o600))
	_, err = LoadKeyer(p)
	require.ErrorContains(t, err, p)

	require.NoError(t, os.WriteFile(p, []byte("  0123456789abcdef0123  \n"), 0o600))
	k, err := LoadKeyer(p)
	require.NoError(t, err)
	k2, err := NewKeyer([]byte("0123456789abcdef0123"))
	require.NoError(t, err)
	require.Equal(t, k2.Of("key"), k.Of("key"), "white space around the secret is not part of it")

	r1, r2 := NewRandomKeyer(), NewRandomKeyer()
	require.NotEqual(t, r1.Of("key"), r2.Of("key"))
}
