package builtin

import (
	"bytes"
	"testing"
)

func TestEveryNameHasAWasmModule(t *testing.T) {
	for _, name := range Names() {
		b, ok := Wasm(name)
		if !ok {
			t.Fatalf("Names lists %q but Wasm has no module for it", name)
		}
		if !bytes.HasPrefix(b, []byte("\x00asm")) {
			t.Fatalf("%s.wasm does not start with the wasm magic", name)
		}
	}
	if _, ok := Wasm("README"); ok {
		t.Fatal("Wasm returned a module for a name that is not a plugin")
	}
}
