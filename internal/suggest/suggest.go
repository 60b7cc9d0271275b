// Package suggest finds the names a mistyped one was probably meant to
// be, for the "did you mean" of the CLI's and the HTTP API's errors.
package suggest

import (
	"fmt"
	"sort"
	"strings"
)

// maxName bounds the names compared: the distance costs the product of
// the lengths, and no name of ours is this long.
const maxName = 64

// Close returns the names close to name (an edit or two away, or
// starting with it when it has three letters or more), sorted.
func Close(name string, names []string) []string {
	if len(name) > maxName {
		return nil
	}
	var out []string
	for _, n := range names {
		if n == name || len(n) > maxName {
			continue
		}
		if d := editDistance(strings.ToLower(name), strings.ToLower(n)); d <= 2 || len(name) >= 3 && strings.HasPrefix(n, name) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Hint is the "; did you mean X?" of a message, or "".
func Hint(name string, names []string) string {
	if s := Close(name, names); len(s) > 0 {
		return fmt.Sprintf("; did you mean %s?", strings.Join(s, " or "))
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
