package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/plugintest"
	"github.com/spf13/cobra"
)

func newVerifyCmd(g *globals, o *pluginsOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "verify PATH|NAME",
		Short: "Run the conformance checks against a plugin",
		Long: `Run the conformance checks of host/plugintest against a plugin: a .wasm
file, a process plugin's .plugin.json manifest, or the name of a plugin the
registry knows (a built-in, or one in the plugins directory). Each check
prints PASS, FAIL with what went wrong, or SKIP when it does not apply; the
exit code is 4 when any check fails.`,
		Example: `  compact-host plugins verify ./logdedup.wasm
  compact-host plugins verify ~/.config/compact-host/plugins/bullet.plugin.json
  compact-host plugins verify structured`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runVerify(cmd.Context(), g, o, args[0]) },
	}
}

func runVerify(ctx context.Context, g *globals, o *pluginsOptions, target string) error {
	a, err := newApp(g, o.engine)
	if err != nil {
		return err
	}
	defer a.close()
	var p *plugin.Plugin
	if _, statErr := os.Stat(target); statErr == nil {
		p, err = plugin.Open(ctx, target, a.pluginOptions(false))
		if err != nil {
			return withCode(ExitPlugin, err)
		}
		defer p.Close()
	} else {
		reg, err := a.plugins(ctx, false)
		if err != nil {
			return err
		}
		if p, err = reg.Strategy(ctx, target); err != nil {
			if p, err = reg.Truncator(ctx, target); err != nil {
				return withCode(ExitPlugin, fmt.Errorf("%s is neither a file nor a known plugin: %w", plugin.Escape(target), err))
			}
		}
	}
	a.progress("verifying %s…", plugin.Escape(target))
	rep := plugintest.Verify(ctx, p)
	if o.json {
		checks := make([]map[string]any, 0, len(rep.Checks))
		for _, c := range rep.Checks {
			status := "pass"
			if c.Skipped {
				status = "skip"
			} else if !c.Passed {
				status = "fail"
			}
			checks = append(checks, map[string]any{"name": c.Name, "status": status, "detail": c.Detail})
		}
		if err := json.NewEncoder(g.io.Out).Encode(map[string]any{"plugin": rep.Plugin, "info": rep.Info, "ok": rep.OK(), "checks": checks}); err != nil {
			return err
		}
	} else if err := rep.WriteText(g.io.Out); err != nil {
		return err
	}
	if !rep.OK() {
		return withCode(ExitPlugin, fmt.Errorf("%s failed %d conformance checks", plugin.Escape(target), len(rep.Failed())))
	}
	return nil
}
