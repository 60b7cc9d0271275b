package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/internal/server"
	"github.com/spf13/cobra"
)

type pluginsOptions struct {
	engine engineFlags
	json   bool
}

func newPluginsCmd(g *globals) *cobra.Command {
	o := &pluginsOptions{}
	cmd := &cobra.Command{
		Use:   "plugins",
		Short: "List, describe and verify strategy and truncator plugins",
		Long: `Plugins are summarization strategies and tool-output truncators. The
built-ins (structured, narrative, truncate) are embedded; more come from the
plugins directory: a *.wasm file is a WebAssembly plugin, a *.plugin.json
manifest describes a process plugin. A plugin named like a built-in
replaces it.`,
	}
	cmd.PersistentFlags().StringVar(&o.engine.pluginsDir, "plugins-dir", "", "directory of plugins; default $COMPACT_HOST_PLUGINS_DIR or <user config dir>/compact-host/plugins")
	cmd.PersistentFlags().BoolVar(&o.json, "json", false, "print JSON")
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the plugins: built-in and from the plugins directory, with broken ones and why",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runPluginsList(cmd.Context(), g, o) },
	}, &cobra.Command{
		Use:   "info NAME",
		Short: "Describe one plugin: kinds, categories, ABI version, source",
		Args:  cobra.ExactArgs(1),
		RunE:  func(cmd *cobra.Command, args []string) error { return runPluginsInfo(cmd.Context(), g, o, args[0]) },
	}, newVerifyCmd(g, o))
	return cmd
}

func listPlugins(ctx context.Context, g *globals, o *pluginsOptions) ([]server.PluginInfo, *app, error) {
	a, err := newApp(g, o.engine)
	if err != nil {
		return nil, nil, err
	}
	reg, err := a.plugins(ctx, false)
	if err != nil {
		a.close()
		return nil, nil, err
	}
	// List loads the built-ins, so their descriptions are known. It starts
	// no process plugin the host has seen before: their Info is cached.
	rows := server.PluginInfos(reg.List(ctx))
	return rows, a, nil
}

func runPluginsList(ctx context.Context, g *globals, o *pluginsOptions) error {
	rows, a, err := listPlugins(ctx, g, o)
	if err != nil {
		return err
	}
	defer a.close()
	if o.json {
		return json.NewEncoder(g.io.Out).Encode(rows)
	}
	// Every field but the source is the plugin's text or its file's
	// name: escaped, so that a name cannot clear the screen or forge rows.
	esc := plugin.Escape
	for _, r := range rows {
		status := esc(strings.Join(r.Kinds, "+"))
		if len(r.Categories) > 0 {
			status += " [" + esc(strings.Join(r.Categories, ", ")) + "]"
		}
		if r.Overridden {
			status += " (overridden by a user plugin)"
		}
		if r.Error != "" {
			status = "BROKEN: " + esc(r.Error)
		}
		where := r.Source
		if r.Path != "" {
			where += " " + esc(r.Path)
		}
		fmt.Fprintf(g.io.Out, "%-14s %-9s %s  (%s)\n", esc(r.Name), esc(r.Version), status, where)
	}
	for _, r := range rows {
		if r.Error != "" {
			return withCode(ExitPlugin, fmt.Errorf("some plugins could not be loaded"))
		}
	}
	return nil
}

func runPluginsInfo(ctx context.Context, g *globals, o *pluginsOptions, name string) error {
	rows, a, err := listPlugins(ctx, g, o)
	if err != nil {
		return err
	}
	defer a.close()
	for _, r := range rows {
		if r.Name != name || r.Overridden {
			continue
		}
		if o.json {
			return json.NewEncoder(g.io.Out).Encode(r)
		}
		esc := plugin.Escape
		fmt.Fprintf(g.io.Out, "name:        %s\nversion:     %s\nABI:         %s\nkinds:       %s\ncategories:  %s\nsource:      %s %s\ndescription: %s\n",
			esc(r.Name), esc(r.Version), r.ABI, esc(strings.Join(r.Kinds, ", ")), esc(strings.Join(r.Categories, ", ")), r.Source, esc(r.Path), esc(r.Description))
		if r.Error != "" {
			fmt.Fprintf(g.io.Out, "error:       %s\n", esc(r.Error))
			return withCode(ExitPlugin, fmt.Errorf("plugin %s is broken", esc(name)))
		}
		return nil
	}
	return withCode(ExitPlugin, fmt.Errorf("%w: no plugin named %q (run 'compact-host plugins list')", plugin.ErrNotFound, name))
}
