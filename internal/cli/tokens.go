package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/compact-host/compact-host/host"
	"github.com/spf13/cobra"
)

type tokensOptions struct {
	engine  engineFlags
	reading readingFlags
	format  string
	text    bool
	json    bool
}

func newTokensCmd(g *globals) *cobra.Command {
	o := &tokensOptions{}
	cmd := &cobra.Command{
		Use:   "tokens [flags] [FILE|-]",
		Short: "Count the tokens of a session's context, or of plain text with --text",
		Long: `Count tokens with each counter: chars/4, o200k and cl100k (the exact
OpenAI tokenizers, offline). A session is counted as its context (what the
model would be sent): for an agent's file (Claude Code, Codex), the live
context the agent sends when it resumes, after its own compactions and
compact-host's, with the full history's count beside it (--full-history
counts the full history as the context); --text counts the raw input.`,
		Example: `  compact-host tokens session.jsonl
  git diff | compact-host tokens --text`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runTokens(cmd.Context(), g, o, args) },
	}
	// Every counter runs, so no --tokenizer; the model and window
	// matter only to read a session as its context.
	cmd.Flags().StringVar(&o.engine.model, "model", "", "the agent's model, for reading a session as its context")
	cmd.Flags().Var(&o.engine.contextWindow, "context-window", "context window in tokens: "+tokenSyntaxHelp)
	addInputFlags(cmd, &o.engine)
	addReadingFlags(cmd, &o.reading)
	cmd.Flags().StringVar(&o.format, "format", "", "input format (default: detected)")
	cmd.Flags().BoolVar(&o.text, "text", false, "count the input as plain text, not a session")
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

func runTokens(ctx context.Context, g *globals, o *tokensOptions, args []string) error {
	a, err := newApp(g, o.engine)
	if err != nil {
		return err
	}
	defer a.close()
	a.reading = o.reading.options()
	if err := a.hostConfig().Validate(); err != nil {
		return a.settingError(err)
	}
	counts, history := map[string]int{}, map[string]int{}
	order := []string{"chars", "o200k", "cl100k"}
	var chars int
	if o.text {
		data, err := a.readInput(ctx, argOr(args, "-"))
		if err != nil {
			return err
		}
		chars = len([]rune(string(data)))
		for _, mode := range order {
			e, err := host.New(host.Config{ContextWindow: host.MaxContextWindow, Tokenizer: mode})
			if err != nil {
				return err
			}
			counts[mode] = e.CountTokens(string(data))
		}
	} else {
		var in *input
		for _, mode := range order {
			hc := a.hostConfig()
			hc.Tokenizer = mode
			e, err := host.New(hc, host.WithLogger(a.log))
			if err != nil {
				return a.settingError(err)
			}
			in, err = a.loadInput(ctx, e, argOr(args, ""), o.format, false)
			if err != nil {
				return err
			}
			counts[mode], history[mode] = in.Session.ContextTokens(), in.HistoryTokens
			if mode == "chars" {
				for _, m := range in.Session.Context() {
					for _, b := range m.Content {
						chars += len([]rune(b.Text)) + len(b.Input)
					}
				}
			}
			if o.format == "" {
				o.format = in.Format // detect once
			}
			// stdin can be read only once.
			if argOr(args, "-") == "-" {
				break
			}
		}
	}
	if o.json {
		doc := map[string]any{"chars": chars, "tokens": counts}
		if !o.text {
			doc["history_tokens"] = history
		}
		return json.NewEncoder(g.io.Out).Encode(doc)
	}
	fmt.Fprintf(g.io.Out, "characters: %s\n", num(chars))
	for _, mode := range order {
		if n, ok := counts[mode]; ok {
			label := mode
			if mode == "chars" {
				label = "chars/4"
			}
			if h, ok := history[mode]; ok && h != n {
				fmt.Fprintf(g.io.Out, "%-8s %s tokens (full history %s)\n", label+":", num(n), num(h))
				continue
			}
			fmt.Fprintf(g.io.Out, "%-8s %s tokens\n", label+":", num(n))
		}
	}
	return nil
}
