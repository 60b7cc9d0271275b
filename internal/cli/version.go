package cli

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/compact-host/compact-host/abi"
	"github.com/spf13/cobra"
)

// buildInfo is what the binary knows of its own build.
type buildInfo struct {
	Version  string
	Commit   string
	Modified bool
}

// Version falls back to the build's own record when -ldflags -X left it
// at "dev": `go install ...@v1.2.3` records v1.2.3, and a build in a git
// checkout records a pseudo-version and the commit (unless -buildvcs=false,
// as CI builds).
func init() {
	bi, ok := debug.ReadBuildInfo()
	Version = fromBuildInfo(Version, bi, ok).Version
}

// fromBuildInfo resolves the version: one set with -ldflags -X wins, then
// the main module's version, then "dev".
func fromBuildInfo(linked string, bi *debug.BuildInfo, ok bool) buildInfo {
	b := buildInfo{Version: linked}
	if !ok || bi == nil {
		if b.Version == "" {
			b.Version = "dev"
		}
		return b
	}
	if b.Version == "" || b.Version == "dev" {
		b.Version = "dev"
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			b.Version = v
		}
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

func newVersionCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the plugin ABI it speaks and the Go toolchain",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi, ok := debug.ReadBuildInfo()
			b := fromBuildInfo(Version, bi, ok)
			v := map[string]any{"version": b.Version, "abi": fmt.Sprintf("v%d.%d", abi.Major, abi.Minor), "go": runtime.Version(), "platform": runtime.GOOS + "/" + runtime.GOARCH}
			build := ""
			if b.Commit != "" {
				v["commit"] = b.Commit
				v["modified"] = b.Modified
				build = ", commit " + b.Commit
				if b.Modified {
					build += " with local changes"
				}
			}
			if asJSON {
				return json.NewEncoder(g.io.Out).Encode(v)
			}
			fmt.Fprintf(g.io.Out, "compact-host %s (plugin ABI %s, %s, %s%s)\n", v["version"], v["abi"], v["go"], v["platform"], build)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
