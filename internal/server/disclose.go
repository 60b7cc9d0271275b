package server

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/compact-host/compact-host/internal/redact"
)

// What the server tells its clients about itself stops at its API: an
// error or a report never names a file of the server (its store, plugins
// directory, home or temporary directory), which would map the machine
// for whoever holds a token, nor a credential. The full text goes to the
// server's log instead.

// serverPath stands for a file path taken out of a message.
const serverPath = "<server path>"

// absPathRE matches what reads as an absolute file path: a slash (or a
// drive letter and a backslash) at the start of a word, and a run of
// characters that file names hold. The API's own routes (/v1/…,
// /healthz) are told apart afterwards.
var absPathRE = regexp.MustCompile(`(^|[\s"'(=\[,:])((?:/|[A-Za-z]:\\)[^\s"'()<>\[\]{},;:]+)`)

// privateRoots are directories of the server whose names never leave it,
// longest first, even where they do not start a word.
func privateRoots(extra ...string) []string {
	roots := slices.Clone(extra)
	if d, err := os.UserHomeDir(); err == nil {
		roots = append(roots, d)
	}
	if d, err := os.UserConfigDir(); err == nil {
		roots = append(roots, d)
	}
	if d, err := os.UserCacheDir(); err == nil {
		roots = append(roots, d)
	}
	if d, err := os.Getwd(); err == nil {
		roots = append(roots, d)
	}
	roots = append(roots, os.TempDir())
	var out []string
	for _, r := range roots {
		// The root directory itself, or a one-letter one, would garble
		// every message.
		if r = filepath.Clean(r); len(r) > 3 && filepath.IsAbs(r) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// public is msg as a client may read it: credentials redacted, and the
// server's file paths replaced by serverPath.
func (s *Server) public(msg string) string {
	msg = redact.String(msg, s.secrets...)
	for _, root := range s.roots {
		msg = strings.ReplaceAll(msg, root, serverPath)
	}
	return absPathRE.ReplaceAllStringFunc(msg, func(m string) string {
		lead := absPathRE.FindStringSubmatch(m)[1]
		path := m[len(lead):]
		if isRoute(path) {
			return m
		}
		return lead + serverPath
	})
}

// isRoute tells a path of the API, or a one-level word such as "/s", from
// a file path.
func isRoute(path string) bool {
	return strings.HasPrefix(path, "/v1/") || path == "/v1" || !strings.Contains(path[1:], "/") && !strings.Contains(path, `\`)
}
