package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func newVerifyCmd(g *globals, o *pluginsOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "verify PATH",
		Short: "Run the conformance checks against a plugin (.wasm or .plugin.json)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withCode(ExitPlugin, errors.New("plugins verify: the conformance kit is not built into this binary yet"))
		},
	}
}
