package cli

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// A command run with --json prints JSON on stdout, and stderr holds JSON
// too: each note, warning, progress line and log record is one JSON
// object on a line of its own, and so is the error that ends the run. A
// script parses both streams without picking text apart.

// stderrLine is a note, warning or error on stderr as a JSON line.
type stderrLine struct {
	Level   string `json:"level"`
	Message string `json:"message"`
	// ElapsedSeconds is the time since the command started, on progress
	// lines.
	ElapsedSeconds float64 `json:"elapsed_seconds,omitempty"`
	// ExitCode ends the run, on the error line.
	ExitCode int `json:"exit_code,omitempty"`
}

// setJSONStderr turns JSON stderr on for a command whose --json is set.
func (g *globals) setJSONStderr(cmd *cobra.Command) {
	if f := cmd.Flags().Lookup("json"); f != nil && f.Value.String() == "true" {
		g.jsonStderr = true
	}
}

// say prints one line on stderr: as it is, or as a JSON line whose level
// is the line's "note:", "warning:" or "error:" prefix (else "info").
func (g *globals) say(line string) {
	if !g.jsonStderr {
		fmt.Fprintln(g.io.Err, line)
		return
	}
	g.sayJSON(splitLevel(line))
}

func (g *globals) sayJSON(l stderrLine) {
	b, err := json.Marshal(l)
	if err != nil {
		b, _ = json.Marshal(stderrLine{Level: "error", Message: err.Error()})
	}
	g.io.Err.Write(append(b, '\n'))
}

// splitLevel reads the level prefix of a line.
func splitLevel(line string) stderrLine {
	for _, level := range []string{"note", "warning", "error"} {
		if msg, ok := strings.CutPrefix(line, level+": "); ok {
			return stderrLine{Level: level, Message: msg}
		}
	}
	return stderrLine{Level: "info", Message: line}
}

// sayProgress prints a progress line.
func (g *globals) sayProgress(elapsed time.Duration, msg string) {
	if !g.jsonStderr {
		fmt.Fprintf(g.io.Err, "[%5.1fs] %s\n", elapsed.Seconds(), msg)
		return
	}
	g.sayJSON(stderrLine{Level: "progress", Message: msg, ElapsedSeconds: max(elapsed.Seconds(), 0.001)})
}

// logHandler is the handler of the command's log: text, or JSON lines
// with --json.
func (g *globals) logHandler(level slog.Level) slog.Handler {
	opts := &slog.HandlerOptions{Level: level}
	if g.jsonStderr {
		return slog.NewJSONHandler(g.io.Err, opts)
	}
	return slog.NewTextHandler(g.io.Err, opts)
}

// jsonRequested reports whether args ask for --json, for an error found
// before the flags were parsed.
func jsonRequested(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "--json=true":
			return true
		}
	}
	return false
}
