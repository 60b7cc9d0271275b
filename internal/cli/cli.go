// Package cli is the compact-host command line. Each command has an
// Options struct filled by its flags and a run function, so flag parsing
// and behaviour are tested apart.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit codes. They are part of the interface: scripts branch on them.
const (
	ExitOK          = 0 // success
	ExitError       = 1 // an unexpected failure
	ExitUsage       = 2 // bad flags or arguments
	ExitInput       = 3 // a missing or malformed input file, or a bad config
	ExitPlugin      = 4 // a plugin failed to load or failed verification
	ExitProvider    = 5 // the model provider failed
	ExitNotFit      = 6 // the session is still over its budget after compaction
	ExitBusy        = 7 // another writer changed or held the session log; nothing was written, run again
	ExitUnavailable = 8 // the environment refused: the address to listen on is taken or not permitted
	// ExitStrategyFailed: the strategy named by --strategy or the config
	// failed and a fallback wrote the result, which was still written.
	ExitStrategyFailed = 9
	ExitInterrupted    = 130 // interrupted (SIGINT/SIGTERM)
)

const exitCodesHelp = `Exit codes:
  0  success; also when the default strategy failed and a fallback wrote
     the summary: the report names the fallback ("fallbacks" in --json) and
     stderr warns
  1  unexpected failure
  2  bad flags or arguments (an unknown --strategy or --tokenizer included)
  3  missing, unreadable, oversized or malformed input, or a bad config file
  4  a plugin failed to load or failed verification
  5  the model provider failed
  6  the session is still over its budget after compaction
  7  another writer changed or held the session log meanwhile, or held its
     lock past --lock-wait; nothing was written: run the command again
  8  the environment refused: the address serve or proxy would listen on is
     in use or not permitted (the message names a free port)
  9  the strategy named by --strategy or the config file failed and a
     fallback wrote the summary; the output is written all the same and the
     report says so ("strategy_failed" in --json); --allow-fallback makes
     this exit 0. With both, a session still over budget exits 6
  130 interrupted (SIGINT or SIGTERM)`

// exitError carries an exit code with an error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return &exitError{code: code, err: err}
}

// IO is where a command reads and writes.
type IO struct {
	In       io.Reader
	Out, Err io.Writer
	// ErrIsTerminal enables progress lines on Err.
	ErrIsTerminal bool
	Getenv        func(string) string
}

// Version is set at build time with -ldflags "-X .../internal/cli.Version=v1.2.3".
var Version = "dev"

// Main runs the command line and returns the exit code. SIGINT and
// SIGTERM cancel the command, which then exits with ExitInterrupted.
func Main(args []string, stdio IO) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, args, stdio)
}

// Run is Main under ctx: the command stops, with ExitInterrupted, when
// ctx ends.
func Run(ctx context.Context, args []string, stdio IO) int {
	if stdio.Getenv == nil {
		stdio.Getenv = os.Getenv
	}
	root, g := newRoot(&stdio)
	root.SetArgs(args)
	root.SetIn(stdio.In)
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code := exitCode(ctx, err)
	msg := err.Error()
	if code == ExitInterrupted {
		msg = "interrupted: " + msg
	}
	if g.jsonStderr || jsonRequested(args) {
		g.jsonStderr = true
		g.sayJSON(stderrLine{Level: "error", Message: msg, ExitCode: code})
		return code
	}
	fmt.Fprintf(stdio.Err, "compact-host: %s\n", msg)
	if code == ExitUsage {
		fmt.Fprintln(stdio.Err, "Run 'compact-host --help' for usage.")
	}
	return code
}

// usageError marks errors of flags and arguments.
type usageError struct{ error }

func isUsageError(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

// globals are the flags every command takes.
type globals struct {
	configPath string
	logLevel   string
	io         *IO
	// deprecated holds a note for each old flag name used.
	deprecated []string
	// jsonStderr makes stderr JSON lines, for commands run with --json.
	jsonStderr bool
}

func newRoot(stdio *IO) (*cobra.Command, *globals) {
	g := &globals{io: stdio}
	compactOpts := &compactOptions{}
	root := &cobra.Command{
		Use:   "compact-host [compact flags] [FILE|-]",
		Short: "Compact LLM agent sessions: decide, cut safely, summarize, never lose the session",
		Long: `compact-host shrinks the conversation of an LLM agent when it outgrows the
model's context window. It cuts the history where no provider will reject
it, has the older part summarized by a strategy plugin, and keeps the
originals so any compaction can be undone.

With no command it compacts: 'compact-host --strategy=structured FILE' is
the same as 'compact-host compact --strategy=structured FILE'. It reads
Claude Code, Codex CLI, Copilot CLI, Gemini CLI, opencode, Aider, Cline /
Roo Code / Kilo Code, SWE-agent and mini-swe-agent sessions, Anthropic and
OpenAI request JSON, and its own session logs.

` + exitCodesHelp,
		Example: `  compact-host --strategy=structured session.jsonl
  compact-host inspect --model gpt-4o rollout.jsonl
  compact-host compact --dry-run --context-window 32000 session.jsonl
  compact-host undo session.compacted.jsonl
  compact-host plugins verify ./my-strategy.wasm`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// A mistyped command looks like a file name to compact; a bare
		// word that is no file and resembles a command is the typo, with
		// or without the arguments meant for the command.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) >= 1 && !strings.ContainsAny(args[0], "./\\") {
				if _, err := os.Stat(args[0]); err != nil {
					if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
						return usageError{fmt.Errorf("unknown command %q; did you mean %s?", args[0], strings.Join(s, " or "))}
					}
				}
			}
			if len(args) > 1 {
				return usageError{fmt.Errorf("compact takes one FILE, got %d arguments (%s); the commands are %s", len(args), strings.Join(args, " "), commandNames(cmd))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCompact(cmd.Context(), g, compactOpts, args)
		},
		PersistentPreRun: func(cmd *cobra.Command, _ []string) { g.setJSONStderr(cmd) },
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.SuggestionsMinimumDistance = 2
	root.PersistentFlags().StringVar(&g.configPath, "config", "", "config file (TOML); default $COMPACT_HOST_CONFIG or <user config dir>/compact-host/config.toml")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "", "log detail on stderr: debug, info, warn (default) or error")
	addCompactFlags(root, compactOpts)

	root.AddCommand(
		newCompactCmd(g),
		newInspectCmd(g),
		newTokensCmd(g),
		newTruncateCmd(g),
		newUndoCmd(g),
		newMCPCmd(g),
		newPluginsCmd(g),
		newServeCmd(g),
		newProxyCmd(g),
		newVersionCmd(g),
		newEvalCmd(g),
		&cobra.Command{
			Use:   "config",
			Short: "The config file reference",
			Long:  configReference,
			Args:  cobra.NoArgs,
			Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprint(cmd.OutOrStdout(), configReference) },
		},
	)
	markUsageErrors(root)
	// Unknown commands look like file names to the root's compact; say so.
	root.SetHelpCommand(&cobra.Command{Use: "help [command]", Short: "Help about any command", Run: func(c *cobra.Command, args []string) {
		cmd, _, e := c.Root().Find(args)
		if cmd == nil || e != nil {
			c.Root().Help()
			return
		}
		cmd.Help()
	}})
	return root, g
}

// markUsageErrors makes the flag and argument errors of every command
// usage errors (exit 2), cobra's own argument checks included.
func markUsageErrors(c *cobra.Command) {
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	if args := c.Args; args != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				if isUsageError(err) {
					return err
				}
				return usageError{fmt.Errorf("%s: %w (see 'compact-host %s --help')", cmd.CommandPath(), err, strings.TrimPrefix(cmd.CommandPath(), "compact-host "))}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		markUsageErrors(sub)
	}
}

// commandNames lists the commands of root, for messages.
func commandNames(root *cobra.Command) string {
	var names []string
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return strings.Join(names, ", ")
}

// deprecatedAlias adds the old name of a renamed flag, bound to the same
// value: it still works and is hidden from --help. Using it leaves a
// note naming the new one, which the command prints as its other notes.
func deprecatedAlias(cmd *cobra.Command, g *globals, old, name string) {
	f := cmd.Flags().Lookup(name)
	note := fmt.Sprintf("note: --%s is deprecated and will be removed; use --%s", old, name)
	cmd.Flags().Var(aliasValue{f.Value, func() {
		if !slices.Contains(g.deprecated, note) {
			g.deprecated = append(g.deprecated, note)
		}
	}}, old, f.Usage)
	cmd.Flags().MarkHidden(old)
}

// aliasValue is a flag's value under its old name: setting it notes the
// use, then sets the value.
type aliasValue struct {
	pflag.Value
	used func()
}

func (v aliasValue) Set(s string) error {
	v.used()
	return v.Value.Set(s)
}
