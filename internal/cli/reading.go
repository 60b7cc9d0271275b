package cli

import (
	"fmt"

	"github.com/compact-host/compact-host/internal/sessionio"
	"github.com/compact-host/compact-host/internal/tokencount"
	"github.com/spf13/cobra"
)

// readingFlags choose how an agent's session file is read: as the live
// context the agent sends when it resumes (the default), or as its full
// history; and the agent's fixed overhead per request.
type readingFlags struct {
	fullHistory bool
	overhead    overheadFlag
}

func addReadingFlags(cmd *cobra.Command, f *readingFlags) {
	cmd.Flags().BoolVar(&f.fullHistory, "full-history", false,
		"read an agent's file (Claude Code, Codex) as its full history, as if no compaction had been made; default: the live context, what the agent sends when it resumes")
	cmd.Flags().Var(&f.overhead, "agent-overhead",
		"tokens the agent adds to every request (system prompt, tool schemas), "+tokenSyntaxHelp+", or 0 for none; default: learned from the usage the file records, else the agent's typical figure")
}

func (f readingFlags) options() sessionio.ReadOptions {
	o := sessionio.ReadOptions{FullHistory: f.fullHistory}
	if f.overhead.set {
		o.AgentOverhead = int(f.overhead.n)
		if o.AgentOverhead == 0 {
			o.AgentOverhead = -1 // none
		}
	}
	return o
}

// overheadFlag is a token count in the syntax of every count
// (tokencount); set says it was given (0 then means none).
type overheadFlag struct {
	n   tokencount.Tokens
	set bool
}

func (o *overheadFlag) String() string { return o.n.String() }
func (o *overheadFlag) Type() string   { return "tokens" }

func (o *overheadFlag) Set(v string) error {
	if err := o.n.Set(v); err != nil {
		return err
	}
	o.set = true
	return nil
}

// overheadText says what the overhead is and where it comes from.
func overheadText(o sessionio.Overhead) string {
	switch o.Source {
	case sessionio.OverheadFile:
		// The usage is of the setup that recorded the file (its tools,
		// its MCP servers, its version); the agent that resumes it may
		// add more or less.
		const whose = "the recording setup's; --agent-overhead sets yours"
		if o.At < 0 {
			return fmt.Sprintf("%s tokens (learned from the usage recorded at the file's start: %s)", num(o.Tokens), whose)
		}
		return fmt.Sprintf("%s tokens (learned from the usage recorded at message %d: %s)", num(o.Tokens), o.At, whose)
	case sessionio.OverheadDefault:
		return fmt.Sprintf("%s tokens (the agent's typical figure; the file records no usable usage)", num(o.Tokens))
	case sessionio.OverheadFlag:
		return fmt.Sprintf("%s tokens (--agent-overhead)", num(o.Tokens))
	}
	return "unknown (not an agent's file; set --agent-overhead)"
}
