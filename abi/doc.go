// Package abi is the contract between compact-host and its plugins: the
// documents a plugin receives and returns, the frame that carries them, the
// version constants and the error codes.
//
// The same documents travel over both transports. A wasm plugin receives a
// frame in its linear memory; a process plugin receives the same frame bytes
// inside a gRPC message. abi/README.md specifies the frame byte by byte so a
// plugin can be written in any language.
//
// A frame is a small JSON header plus a list of raw byte blobs. Every field
// that can be large (message text, tool output, a summary) is carried as a
// blob and referenced from the header by index, so a 10 MB tool output is
// copied, never escaped.
package abi
