package plugin

import (
	"errors"

	"github.com/compact-host/compact-host/host/internal/pluginapi"
)

// Error is the error of a failed plugin operation: its Kind is one of the
// Err* values below, so a caller branches with errors.Is(err, ErrTrap),
// and the error names the plugin and where it was loaded from. errors.As
// reaches the cause: an *abi.Error for ErrPluginError, a *VersionError for
// ErrVersionMismatch.
type Error = pluginapi.Error

// VersionError is the cause of ErrVersionMismatch: "plugin wants ABI vN,
// host speaks v1".
type VersionError = pluginapi.VersionError

// Kinds of Error.
var (
	// ErrVersionMismatch: the plugin was built for another ABI major. A
	// wasm plugin is refused before instantiation, from the names of its
	// imports and exports.
	ErrVersionMismatch = pluginapi.ErrVersionMismatch
	// ErrInvalidPlugin: not a compact-host plugin (missing exports, wrong
	// signatures, imports the host does not provide, bad manifest).
	ErrInvalidPlugin = pluginapi.ErrInvalidPlugin
	// ErrTrap: a wasm plugin trapped or exited during a call.
	ErrTrap = pluginapi.ErrTrap
	// ErrDeadlineExceeded: the call's context ended first. The instance
	// (wasm) or process was killed.
	ErrDeadlineExceeded = pluginapi.ErrDeadlineExceeded
	// ErrMemoryLimit: a wasm plugin needed more memory than its limit.
	ErrMemoryLimit = pluginapi.ErrMemoryLimit
	// ErrOutputTooLarge: the answer is over the output size cap.
	ErrOutputTooLarge = pluginapi.ErrOutputTooLarge
	// ErrMalformedOutput: the answer is not a valid frame or document, or
	// the plugin handed the host a pointer outside its memory.
	ErrMalformedOutput = pluginapi.ErrMalformedOutput
	// ErrCrash: a process plugin died during the call; the next call
	// starts it again.
	ErrCrash = pluginapi.ErrCrash
	// ErrHandshake: a process plugin did not complete the go-plugin
	// handshake in time, or its checksum did not match.
	ErrHandshake = pluginapi.ErrHandshake
	// ErrPluginError: the plugin answered with an error frame; the cause
	// is the *abi.Error (abi.CodeUnsupported for an unknown category, say).
	ErrPluginError = pluginapi.ErrPluginError
	// ErrClosed: the plugin was closed, or replaced by a newer file.
	ErrClosed = pluginapi.ErrClosed
)

// ErrNotFound is returned by Registry lookups that match no plugin.
var ErrNotFound = errors.New("plugin: not found")

// ErrNoRuntime is the Kind of the Error of a plugin whose runtime is not
// wired in: a .wasm file without Options.Wasm, a manifest without
// Options.Process.
var ErrNoRuntime = errors.New("no runtime for this kind of plugin")

// Escape returns s with its control characters, format characters and
// invalid UTF-8 written as Go escapes ("\x1b[2J" for ESC [ 2 J). Use it
// for every plugin-provided text (a name, a description, an error) that
// reaches a terminal or a log that does not quote it.
func Escape(s string) string { return pluginapi.Escape(s) }
