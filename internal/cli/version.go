package cli

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/compact-host/compact-host/abi"
	"github.com/spf13/cobra"
)

func newVersionCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the plugin ABI it speaks and the Go toolchain",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := map[string]any{"version": Version, "abi": fmt.Sprintf("v%d.%d", abi.Major, abi.Minor), "go": runtime.Version(), "platform": runtime.GOOS + "/" + runtime.GOARCH}
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						v["commit"] = s.Value
					}
				}
			}
			if asJSON {
				return json.NewEncoder(g.io.Out).Encode(v)
			}
			fmt.Fprintf(g.io.Out, "compact-host %s (plugin ABI %s, %s, %s)\n", v["version"], v["abi"], v["go"], v["platform"])
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
