package plugintest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/process"
	"github.com/compact-host/compact-host/plugins/narrative"
	"github.com/compact-host/compact-host/plugins/structured"
	"github.com/compact-host/compact-host/plugins/truncate"
	"github.com/compact-host/compact-host/sdk"
)

// The built-ins pass the same checks as go-plugin processes built from
// their own mains, and linked in-process; TestBuiltinsConform covers wasm.
func TestBuiltinsConformOverProcessAndInProcess(t *testing.T) {
	builtins := map[string]func() *sdk.Plugin{"structured": structured.New, "narrative": narrative.New, "truncate": truncate.New}
	dir := t.TempDir()
	for name, newPlugin := range builtins {
		t.Run(name+"/in-process", func(t *testing.T) {
			Run(t, plugin.InProcess(newPlugin(), plugin.Options{}))
		})
		t.Run(name+"/process", func(t *testing.T) {
			if testing.Short() {
				t.Skip("builds a plugin binary")
			}
			bin := filepath.Join(dir, name)
			build := exec.Command("go", "build", "-o", bin, "../../plugins/"+name+"/cmd/"+name)
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
			p, err := plugin.StartProcess(context.Background(), plugin.Manifest{Command: bin}, plugin.Options{Process: process.Runtime})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if p.Info().Name != name {
				t.Fatalf("process says it is %q", p.Info().Name)
			}
			Run(t, p)
		})
	}
	os.RemoveAll(dir)
}
