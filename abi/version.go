package abi

import "fmt"

// Major is the ABI major version this package speaks. A plugin built for
// another major is refused before it is instantiated.
const Major = 1

// Minor is the ABI minor version. Minor versions only add fields and
// exports; a plugin built against an older minor keeps working.
const Minor = 1

// Names that carry the major version, so that a mismatch is visible in a
// module's import and export lists before any of its code runs.
const (
	// ExportMarker is an exported no-op function every wasm plugin of
	// this major defines. A plugin for major N exports "compact_plugin_abi_vN".
	ExportMarker = "compact_plugin_abi_v1"
	// HostModule is the wasm import module holding the host functions.
	HostModule = "compact_host_v1"
	// ExportPrefix prefixes every other export of a wasm plugin.
	ExportPrefix = "compact_v1_"
)

// Wasm exports, see abi/README.md for their signatures.
const (
	ExportAlloc     = ExportPrefix + "alloc"     // (size i32) -> ptr i32
	ExportFree      = ExportPrefix + "free"      // (ptr i32)
	ExportInfo      = ExportPrefix + "info"      // () -> i64 (ptr<<32 | len)
	ExportSummarize = ExportPrefix + "summarize" // (ptr i32, len i32) -> i64
	ExportTruncate  = ExportPrefix + "truncate"  // (ptr i32, len i32) -> i64
)

// Host functions in HostModule.
const (
	HostCall     = "call"     // (op i32, ptr i32, len i32) -> i64 result length or -errcode
	HostResult   = "result"   // (ptr i32, len i32) -> i32 bytes copied
	HostLog      = "log"      // (level i32, ptr i32, len i32)
	HostDeadline = "deadline" // () -> i64 unix nanoseconds of the call's deadline, 0 if none
)

// Host operations passed to HostCall.
const (
	OpComplete    = 1 // CompleteRequest -> CompleteResponse
	OpCountTokens = 2 // CountTokensRequest -> CountTokensResponse
)

// Process plugins (hashicorp/go-plugin) use the major as the handshake's
// ProtocolVersion and this magic cookie.
const (
	HandshakeCookieKey   = "COMPACT_HOST_PLUGIN"
	HandshakeCookieValue = "a3f1c0de-compact-host-plugin"
)

// MarkerFor returns the export marker name for a major version.
func MarkerFor(major int) string { return fmt.Sprintf("compact_plugin_abi_v%d", major) }

// HostModuleFor returns the host import module name for a major version.
func HostModuleFor(major int) string { return fmt.Sprintf("compact_host_v%d", major) }
