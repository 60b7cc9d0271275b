package cli

import (
	"errors"
	"fmt"
)

// recallHintOn resolves --recall-hint: auto names the recall tools in
// summaries exactly when the proxy serves them (--mcp), so that no request
// names a tool the agent lacks; on is for an agent that runs
// `compact-host mcp --conversation` itself.
func (o *proxyOptions) recallHintOn() (bool, error) {
	if o.mcp && !o.keepOriginals {
		return false, usageError{errors.New("--mcp serves the originals --keep-originals keeps: drop --keep-originals=false")}
	}
	switch o.recallHint {
	case "auto":
		return o.mcp, nil
	case "on", "off":
		return o.recallHint == "on", nil
	}
	return false, usageError{fmt.Errorf("--recall-hint %q: want auto (on with --mcp), on or off", o.recallHint)}
}
