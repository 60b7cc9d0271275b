package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/internal/server"
	"github.com/compact-host/compact-host/internal/suggest"
	"github.com/compact-host/compact-host/internal/tokencount"
	"github.com/spf13/cobra"
)

type truncateOptions struct {
	engine    engineFlags
	tool      string
	category  string
	maxTokens tokencount.Tokens
	json      bool
}

func newTruncateCmd(g *globals) *cobra.Command {
	o := &truncateOptions{}
	cmd := &cobra.Command{
		Use:   "truncate [flags] [FILE|-]",
		Short: "Cap a tool output with its category's truncator",
		Long: `Shorten one tool output as the engine would before it enters a session.
The category comes from --category, or from the tool name (--tool) through
the [tools] categories of the config over the defaults: Bash and shells are
head-tail, Grep and Glob match-list, Read file-content, others generic.
Truncators are plugins; a plugin may add categories of its own.`,
		Example: `  go test ./... 2>&1 | compact-host truncate --tool Bash --max-tokens 2000
  compact-host truncate --category match-list --max-tokens 500 grep-output.txt`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runTruncate(cmd.Context(), g, o, args) },
	}
	addBudgetFlags(cmd, &o.engine)
	addPluginsFlag(cmd, &o.engine)
	addInputFlags(cmd, &o.engine)
	cmd.Flags().StringVar(&o.tool, "tool", "", "the tool that produced the output (picks the category)")
	cmd.Flags().StringVar(&o.category, "category", "", "output category: head-tail, match-list, file-content, generic, or a plugin's")
	cmd.Flags().Var(&o.maxTokens, "max-tokens", "the cap, notice included, e.g. 2000 or 2k (default: [tools] output_tokens, or a fortieth of the budget)")
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON with the sizes and the output")
	return cmd
}

func runTruncate(ctx context.Context, g *globals, o *truncateOptions, args []string) error {
	a, err := newApp(g, o.engine)
	if err != nil {
		return err
	}
	defer a.close()
	e, err := a.engine(ctx, false)
	if err != nil {
		return err
	}
	if o.category != "" {
		if err := a.checkCategory(ctx, o.category); err != nil {
			return err
		}
	}
	data, err := a.readInput(ctx, argOr(args, "-"))
	if err != nil {
		return err
	}
	category := o.category
	if category == "" {
		category = e.ToolCategory(o.tool)
	}
	out := e.TruncateOutput(ctx, category, o.tool, data, int(o.maxTokens))
	if o.json {
		// The answer of POST /v1/truncate, so the names are the API's.
		return json.NewEncoder(g.io.Out).Encode(server.TruncateResponse{
			Content: string(out), Category: category, Truncated: !bytes.Equal(data, out),
			BytesBefore: len(data), BytesAfter: len(out), TokensBefore: e.CountTokens(string(data)), TokensAfter: e.CountTokens(string(out)),
		})
	}
	_, err = g.io.Out.Write(out)
	return err
}

// checkCategory refuses a --category no truncator handles, before the
// input is read: the engine would cut head and tail instead, silently.
func (a *app) checkCategory(ctx context.Context, category string) error {
	reg, err := a.plugins(ctx, false)
	if err != nil {
		return err
	}
	if _, err := reg.Truncator(ctx, category); !errors.Is(err, plugin.ErrNotFound) {
		return nil // a broken truncator fails, and falls back, when used
	}
	names := server.CategoryNames(ctx, reg)
	return usageError{fmt.Errorf("--category %q: no truncator handles this category; the categories are %s%s",
		category, strings.Join(names, ", "), suggest.Hint(category, names))}
}
