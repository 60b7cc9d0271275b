// Package digest is the offline machinery the built-in strategies share:
// it reads a folded span of a conversation and extracts, without a model,
// what a summary must keep (the user's requests verbatim, the files read and
// modified, the last errors, stated decisions and open items, a turn-by-turn
// outline), renders a transcript for a summarizer prompt, and parses and
// sizes markdown summaries.
//
// Everything here is deterministic: the same messages give the same digest,
// so offline summaries can be compared with golden files. It imports only
// abi and the standard library, because the plugins that use it are built
// to wasip1/wasm.
package digest
