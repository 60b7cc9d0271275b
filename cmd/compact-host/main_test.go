package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/internal/cli"
	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"compact-host": func() {
			os.Exit(cli.Main(os.Args[1:], cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
		},
	})
}

// TestScripts runs the CLI scenarios in testdata/script. Each script gets
// the project's examples in $EXAMPLES, the hostile test plugins in
// $HOSTILE, and a compilation cache
// shared by all scripts, so the built-in wasm plugins compile once.
func TestScripts(t *testing.T) {
	cache := t.TempDir()
	examples, err := filepath.Abs("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	hostile, err := filepath.Abs("../../host/internal/wasmrt/testdata")
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// Scripts that build a plugin need the go command's own settings;
	// testscript starts from an empty environment.
	goEnv := map[string]string{}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS", "GOPROXY", "GOTOOLCHAIN"} {
		out, err := exec.Command("go", "env", k).Output()
		if err == nil {
			goEnv[k] = strings.TrimSpace(string(out))
		}
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("COMPACT_HOST_CACHE_DIR", cache)
			env.Setenv("EXAMPLES", examples)
			env.Setenv("HOSTILE", hostile)
			env.Setenv("ROOT", root)
			for k, v := range goEnv {
				env.Setenv(k, v)
			}
			env.Setenv("XDG_CONFIG_HOME", filepath.Join(env.WorkDir, ".config"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// exitcode N cmd args... runs a program and checks its exit
			// code, which `exec` and `! exec` cannot tell apart.
			"exitcode": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) < 2 {
					ts.Fatalf("usage: exitcode N command [args...]")
				}
				want, err := strconv.Atoi(args[0])
				if err != nil {
					ts.Fatalf("exitcode: %v", err)
				}
				err = ts.Exec(args[1], args[2:]...)
				got := 0
				if ee, ok := err.(*exec.ExitError); ok {
					got = ee.ExitCode()
				} else if err != nil {
					ts.Fatalf("exitcode: %v", err)
				}
				if (got == want) == neg {
					ts.Fatalf("exit code %d, want %d", got, want)
				}
			},
		},
	})
}
