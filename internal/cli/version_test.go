package cli

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestVersionFromBuildInfo(t *testing.T) {
	installed := &debug.BuildInfo{Main: debug.Module{Path: "github.com/compact-host/compact-host", Version: "v1.2.3"}}
	checkout := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261124093000-0123456789ab+dirty"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}}}
	noVCS := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
	tests := []struct {
		name   string
		linked string
		bi     *debug.BuildInfo
		ok     bool
		want   buildInfo
	}{
		{"go install at a tag", "dev", installed, true, buildInfo{Version: "v1.2.3"}},
		{"git checkout with changes", "dev", checkout, true, buildInfo{Version: "v0.0.0-20261124093000-0123456789ab+dirty", Commit: "0123456789abcdef", Modified: true}},
		{"-buildvcs=false", "dev", noVCS, true, buildInfo{Version: "dev"}},
		{"-ldflags -X wins", "v2.0.0-rc.1", checkout, true, buildInfo{Version: "v2.0.0-rc.1", Commit: "0123456789abcdef", Modified: true}},
		{"no build info", "", nil, false, buildInfo{Version: "dev"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, fromBuildInfo(tt.linked, tt.bi, tt.ok))
		})
	}
}
