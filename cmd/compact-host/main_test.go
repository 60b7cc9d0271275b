package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/compact-host/compact-host/internal/cli"
	"github.com/compact-host/compact-host/internal/testwasm"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stretchr/testify/require"
)

// runMainEnv makes the test binary run the command line itself, for the
// tests that signal a real process.
const runMainEnv = "COMPACT_HOST_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Exit(cli.Main(os.Args[1:], cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
	}
	testscript.Main(m, map[string]func(){
		"compact-host": func() {
			os.Exit(cli.Main(os.Args[1:], cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
		},
	})
}

// TestScripts runs the CLI scenarios in testdata/script. Each script gets
// its own copy of the project's examples in $EXAMPLES and of the hostile
// test plugins in $HOSTILE, so nothing a script or a user writes beside
// the originals changes what another run sees, and a compilation cache
// shared by all scripts, so the built-in wasm plugins compile once.
func TestScripts(t *testing.T) {
	// The CLI keeps compiled modules in cache_dir/wazero.
	cache := t.TempDir()
	_, err := testwasm.ShareCompiled(filepath.Join(cache, "wazero"))
	require.NoError(t, err)
	examples, err := filepath.Abs("../../examples")
	require.NoError(t, err)
	hostile, err := filepath.Abs("../../host/internal/wasmrt/testdata")
	require.NoError(t, err)
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
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
			fixtures := filepath.Join(env.WorkDir, ".fixtures")
			if err := copyFiles(examples, filepath.Join(fixtures, "examples"), exampleFiles); err != nil {
				return err
			}
			wasm, err := filepath.Glob(filepath.Join(hostile, "*.wasm"))
			if err != nil {
				return err
			}
			for i := range wasm {
				wasm[i] = filepath.Base(wasm[i])
			}
			if err := copyFiles(hostile, filepath.Join(fixtures, "hostile"), wasm); err != nil {
				return err
			}
			env.Setenv("EXAMPLES", filepath.Join(fixtures, "examples"))
			env.Setenv("HOSTILE", filepath.Join(fixtures, "hostile"))
			env.Setenv("ROOT", root)
			for k, v := range goEnv {
				env.Setenv(k, v)
			}
			env.Setenv("XDG_CONFIG_HOME", filepath.Join(env.WorkDir, ".config"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// holdlock FILE takes the exclusive lock a session file's
			// writers take (flock) until the script ends: a running
			// agent appending to it.
			"holdlock": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: holdlock FILE")
				}
				f, err := os.Open(ts.MkAbs(args[0]))
				ts.Check(err)
				ts.Check(syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))
				ts.Defer(func() { f.Close() })
			},
			// wasmimport FILE MODULE NAME writes a wasm module whose one
			// import is the function MODULE.NAME: what a toolchain leaves
			// for an undefined function.
			"wasmimport": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 3 {
					ts.Fatalf("usage: wasmimport FILE MODULE NAME")
				}
				b := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
				b = append(b, 0x01, 0x08, 0x01, 0x60, 0x04, 0x7f, 0x7f, 0x7f, 0x7f, 0x00) // (i32 i32 i32 i32) -> ()
				imp := append([]byte{0x01, byte(len(args[1]))}, args[1]...)
				imp = append(append(imp, byte(len(args[2]))), args[2]...)
				imp = append(imp, 0x00, 0x00) // a function of type 0
				b = append(append(b, 0x02, byte(len(imp))), imp...)
				ts.Check(os.WriteFile(ts.MkAbs(args[0]), b, 0o644))
			},
			// holdport VAR listens on a free loopback port until the
			// script ends and sets VAR to its address: a port in use.
			"holdport": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: holdport VAR")
				}
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				ts.Check(err)
				ts.Defer(func() { ln.Close() })
				ts.Setenv(args[0], ln.Addr().String())
			},
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

// exampleFiles are the files of examples/ the scripts read. They are named
// one by one: a copy of the whole directory would carry along what a user
// wrote there (the README's first command writes beside the sample).
var exampleFiles = []string{
	"sessions/bugfix.jsonl",
	"c-truncator/logdedup.wasm",
	"process-strategy/bullet.plugin.json",
}

// copyFiles copies the named files, relative to from, under to.
func copyFiles(from, to string, names []string) error {
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(from, name))
		if err != nil {
			return err
		}
		dst := filepath.Join(to, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
