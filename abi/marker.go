package abi

import (
	"strconv"
	"strings"
)

// MarkerHeading opens the list of markers AppendMarkers adds to a summary.
const MarkerHeading = "## Recall"

// AppendMarkers returns summary with a line for each marker of ms it does
// not already carry, under MarkerHeading. A strategy calls it to keep the
// markers of its request; the host calls it again on every summary, so a
// marker is never lost and never listed twice.
func AppendMarkers(summary string, ms []Marker) string {
	var add strings.Builder
	for _, m := range ms {
		if m.Ref == "" || strings.Contains(summary, m.Text()) || strings.Contains(add.String(), m.Text()) {
			continue
		}
		if add.Len() == 0 {
			add.WriteString("\n\n" + MarkerHeading + "\n")
		}
		add.WriteString("- " + m.Text() + " " + m.describe() + "\n")
	}
	if add.Len() == 0 {
		return summary
	}
	return strings.TrimRight(strings.TrimRight(summary, "\n")+add.String(), "\n")
}

func (m Marker) describe() string {
	size := ""
	if m.Bytes > 0 {
		size = " (" + strconv.Itoa(m.Bytes) + " bytes)"
	}
	if m.Kind == MarkerToolOutput {
		name := m.ToolName
		if name == "" {
			name = "a tool"
		}
		return "output of " + name + size
	}
	return "the folded messages" + size
}

// maxRefLen bounds what MarkersIn accepts as a reference.
const maxRefLen = 64

// MarkersIn returns the references of the markers in text, in order, once
// each: what a summary being merged already stands for.
func MarkersIn(text string) []string {
	var refs []string
	seen := map[string]bool{}
	for rest := text; ; {
		i := strings.Index(rest, "[recall:")
		if i < 0 {
			return refs
		}
		rest = rest[i+len("[recall:"):]
		j := strings.IndexByte(rest, ']')
		if j < 0 {
			return refs
		}
		if ref := rest[:j]; ValidRef(ref) && !seen[ref] {
			seen[ref] = true
			refs = append(refs, ref)
		}
	}
}

// ValidRef reports whether ref has the form of a marker's reference: "s-"
// or "t-" and lower-case hex, at most 64 bytes. Anything else (a path, a
// traversal, a query) is no reference.
func ValidRef(ref string) bool {
	if len(ref) < 3 || len(ref) > maxRefLen || (ref[0] != 's' && ref[0] != 't') || ref[1] != '-' {
		return false
	}
	for i := 2; i < len(ref); i++ {
		c := ref[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
