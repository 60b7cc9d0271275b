// Package pluginapi holds what the plugin runtimes share with the public
// host/plugin package: the typed errors, the Services a call receives, the
// host side of host calls, and log plumbing. host/plugin re-exports the
// errors so callers never import this package.
package pluginapi

import (
	"errors"
	"fmt"

	"github.com/compact-host/compact-host/abi"
)

// Error kinds. Every error a runtime returns for a plugin is an *Error
// whose Kind is one of these, so callers branch with errors.Is.
var (
	ErrVersionMismatch  = errors.New("ABI version mismatch")
	ErrInvalidPlugin    = errors.New("not a valid plugin")
	ErrTrap             = errors.New("plugin trapped")
	ErrDeadlineExceeded = errors.New("plugin call deadline exceeded")
	ErrMemoryLimit      = errors.New("plugin memory limit reached")
	ErrOutputTooLarge   = errors.New("plugin output too large")
	ErrMalformedOutput  = errors.New("plugin returned malformed output")
	ErrCrash            = errors.New("plugin process crashed")
	ErrHandshake        = errors.New("plugin handshake failed")
	ErrPluginError      = errors.New("plugin returned an error")
	ErrClosed           = errors.New("plugin is closed")
)

// Error is a failure of one plugin operation.
type Error struct {
	// Kind is one of the Err* kinds of this package.
	Kind error
	// Plugin is the plugin's name, Path where it was loaded from (empty
	// for built-ins and in-process plugins).
	Plugin string
	Path   string
	// Op is what failed: "load", "info", "summarize" or "truncate".
	Op string
	// Err is the cause. For ErrPluginError it is the plugin's *abi.Error;
	// for ErrVersionMismatch a *VersionError.
	Err error
}

// Error names the plugin, its path and what failed. The cause is often
// the plugin's own text, so the message is escaped (see Escape): it goes
// to terminals and logs.
func (e *Error) Error() string {
	where := fmt.Sprintf("plugin %q", e.Plugin)
	if e.Path != "" {
		where += " (" + e.Path + ")"
	}
	if e.Err == nil {
		return Escape(fmt.Sprintf("%s: %s: %v", where, e.Op, e.Kind))
	}
	return Escape(fmt.Sprintf("%s: %s: %v: %v", where, e.Op, e.Kind, e.Err))
}

// Unwrap returns the kind and the cause, so errors.Is matches both.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// VersionError says which ABI major a plugin was built for.
type VersionError struct {
	Want int // the plugin's major
	Have int // the host's major
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("plugin wants ABI v%d, host speaks v%d", e.Want, e.Have)
}

// Errorf returns an *Error of kind with a formatted cause.
func Errorf(kind error, op, format string, args ...any) *Error {
	return &Error{Kind: kind, Op: op, Err: fmt.Errorf(format, args...)}
}

// Located sets the plugin name and path of err if it is an *Error without
// them, and returns err.
func Located(err error, name, path string) error {
	var e *Error
	if errors.As(err, &e) {
		if e.Plugin == "" {
			e.Plugin = name
		}
		if e.Path == "" {
			e.Path = path
		}
	}
	return err
}

// OpName is the operation an export performs, as errors name it: "info",
// "summarize", "truncate".
func OpName(export string) string {
	switch export {
	case abi.ExportInfo:
		return "info"
	case abi.ExportSummarize:
		return "summarize"
	case abi.ExportTruncate:
		return "truncate"
	}
	return export
}
