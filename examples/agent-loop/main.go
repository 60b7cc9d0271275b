// Command agent-loop shows the engine embedded in an agent loop: the gate
// before every model call, tool outputs capped before they enter the
// session, usage reports calibrating the estimates, overflow recovery, and
// the events the engine reports.
//
// The "model" here is a script that reads every Go file under a directory,
// one tool call per turn, then answers; put your provider call in its
// place. Run it on any directory:
//
//	go run ./examples/agent-loop -dir ./host -window 24000
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugin/inprocess"
)

func main() {
	dir := flag.String("dir", ".", "directory whose Go files the agent reads")
	window := flag.Int("window", 24000, "context window of the model, in tokens")
	log := flag.String("log", "", "session log to write (default: a temporary file)")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *dir, *window, *log); err != nil {
		fmt.Fprintln(os.Stderr, "agent-loop:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, dir string, window int, logPath string) error {
	// The built-in strategies and truncators, linked in process; offline,
	// since no model is configured. A plugin.Registry with the runtimes of
	// host/plugin/wasm and host/plugin/process adds the plugins directory.
	builtins := inprocess.Builtins(plugin.Options{})
	eng, err := host.New(host.Config{ContextWindow: window, MaxOutputTokens: window / 8},
		host.WithPlugins(builtins), host.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return err
	}
	eng.Subscribe(func(ev host.Event) {
		switch e := ev.(type) {
		case *host.CompactionEvent:
			fmt.Fprintf(out, "  compaction %s: %s, %d messages folded, %d -> %d tokens\n", e.CompactionID, e.Strategy, e.MessagesFolded, e.TokensBefore, e.TokensAfter)
		case *host.PruneEvent:
			fmt.Fprintf(out, "  pruned %d old tool results: %d -> %d tokens\n", e.Results, e.TokensBefore, e.TokensAfter)
		case *host.TruncationEvent:
			fmt.Fprintf(out, "  capped %s output (%s): %d -> %d bytes\n", e.Tool, e.Category, e.BytesBefore, e.BytesAfter)
		}
	})
	if logPath == "" {
		f, err := os.CreateTemp("", "agent-loop-*.jsonl")
		if err != nil {
			return err
		}
		f.Close()
		logPath = f.Name()
		defer os.Remove(logPath)
	}
	sess, err := eng.OpenSession(logPath)
	if err != nil {
		return err
	}
	defer sess.Close()

	model := newScriptedModel(dir)
	tools := `[{"name":"Read","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}}}}]`
	req := host.Request{ToolSchemaTokens: eng.CountTokens(tools)}
	sess.Append(host.Message{Role: abi.RoleSystem, Pinned: true, Content: []host.Block{{Type: abi.BlockText, Text: "You review Go code."}}})
	sess.Append(host.Message{Role: abi.RoleUser, Content: []host.Block{{Type: abi.BlockText, Text: "Read every Go file under " + dir + " and list the exported functions."}}})

	for turn := 1; ; turn++ {
		d, err := eng.EnsureFits(ctx, sess, req)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "turn %d: %d/%d tokens (%s)\n", turn, d.TokensAfter, d.Budget, d.Action)
		reply, err := model.complete(sess.Context(), d.TokensAfter)
		if retry, rerr := eng.RecoverOverflow(ctx, sess, err); retry {
			continue // compacted; one retry that does not count as an ordinary one
		} else if rerr != nil || err != nil {
			return errors.Join(rerr, err)
		}
		if err := eng.AppendReply(sess, reply); err != nil {
			return err
		}
		calls := toolCalls(reply)
		if len(calls) == 0 {
			fmt.Fprintf(out, "done after %d turns; %d compactions; the model said: %s\n", turn, len(sess.Compactions()), reply.Content[0].Text)
			return nil
		}
		var results []host.Block
		for _, c := range calls {
			output := runTool(c)
			results = append(results, host.Block{Type: abi.BlockToolResult, ToolUseID: c.ID, Text: string(eng.TruncateToolOutput(ctx, c.Name, output, 0))})
		}
		if err := sess.Append(host.Message{Role: abi.RoleUser, Content: results}); err != nil {
			return err
		}
	}
}

// scriptedModel stands in for a provider: it asks to read each Go file in
// turn and reports usage the way a provider does.
type scriptedModel struct {
	files []string
	next  int
}

func newScriptedModel(dir string) *scriptedModel {
	m := &scriptedModel{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") {
			m.files = append(m.files, p)
		}
		return nil
	})
	return m
}

func (m *scriptedModel) complete(_ []host.Message, promptTokens int) (host.Message, error) {
	usage := &host.Usage{InputTokens: promptTokens, OutputTokens: 40}
	if m.next == len(m.files) {
		return host.Message{Role: abi.RoleAssistant, Usage: usage, Content: []host.Block{{Type: abi.BlockText, Text: fmt.Sprintf("I read %d files.", len(m.files))}}}, nil
	}
	path := m.files[m.next]
	m.next++
	input, _ := json.Marshal(map[string]string{"file_path": path})
	return host.Message{Role: abi.RoleAssistant, Usage: usage, Content: []host.Block{
		{Type: abi.BlockText, Text: "Reading " + path + "."},
		{Type: abi.BlockToolUse, ID: fmt.Sprintf("call_%d", m.next), Name: "Read", Input: input},
	}}, nil
}

func toolCalls(m host.Message) []host.Block {
	var calls []host.Block
	for _, b := range m.Content {
		if b.Type == abi.BlockToolUse {
			calls = append(calls, b)
		}
	}
	return calls
}

func runTool(c host.Block) []byte {
	var in struct {
		FilePath string `json:"file_path"`
	}
	json.Unmarshal(c.Input, &in)
	b, err := os.ReadFile(in.FilePath)
	if err != nil {
		return []byte("error: " + err.Error())
	}
	return b
}
