package wasmrt

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// moduleImporting is a wasm module of one function type (four i32, no
// result) imported as module.name.
func moduleImporting(module, name string) []byte {
	b := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	types := []byte{0x01, 0x60, 0x04, 0x7f, 0x7f, 0x7f, 0x7f, 0x00}
	b = append(b, 0x01, byte(len(types)))
	b = append(b, types...)
	imp := []byte{0x01, byte(len(module))}
	imp = append(imp, module...)
	imp = append(imp, byte(len(name)))
	imp = append(imp, name...)
	imp = append(imp, 0x00, 0x00)
	b = append(b, 0x02, byte(len(imp)))
	return append(b, imp...)
}

// An AssemblyScript module built without --use abort= imports env.abort;
// the error names the import and the build flag that replaces it, where
// it used to say only "imports module env".
func TestEnvImportsNameTheFix(t *testing.T) {
	_, err := precheck(moduleImporting("env", "abort"))
	require.ErrorContains(t, err, "imports env.abort, which the host does not provide")
	require.ErrorContains(t, err, "--use abort=~lib/compact-host-sdk/index/pluginAbort")

	_, err = precheck(moduleImporting("env", "memcpy"))
	require.ErrorContains(t, err, "imports env.memcpy, which the host does not provide")
	require.ErrorContains(t, err, "define or link it")

	_, err = precheck(moduleImporting("wasi_snapshot_preview1", "fd_write"))
	require.NoError(t, err)
}
