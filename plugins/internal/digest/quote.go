package digest

import (
	"fmt"
	"strings"
)

// The request in progress is quoted whole up to a share of the summary's
// target, at least minRequestBytes and at most maxRequestBytes; a longer
// one (a pasted plan) keeps its head and tail lines and says what it left
// out.
const (
	minRequestBytes = 8_000
	maxRequestBytes = 32_000

	minShortRequestBytes = 1_200
)

// RequestCap is the size up to which the request in progress is quoted
// whole in a summary of target tokens (0: no target).
func RequestCap(target int) int {
	if target <= 0 {
		return maxRequestBytes
	}
	return min(max(target*4*3/5, minRequestBytes), maxRequestBytes)
}

// ShortRequestCap is the size a long request in progress is cut to when
// the summary needs the room for everything else: two fifths of the
// target, at least minShortRequestBytes.
func ShortRequestCap(target int) int {
	if target <= 0 {
		return maxRequestBytes
	}
	return min(max(target*4*2/5, minShortRequestBytes), RequestCap(target))
}

// QuoteRequest quotes the request in progress, whole up to max bytes;
// past that its head and tail lines, with a line saying what was left out.
func QuoteRequest(text string, max int) string {
	text = WithoutImages(strings.TrimSpace(text))
	if len(text) <= max {
		return Quote(text)
	}
	lines := strings.Split(text, "\n")
	head, tail := 0, len(lines)
	size := 0
	for head < tail && size+len(lines[head])+1 <= max*2/3 {
		size += len(lines[head]) + 1
		head++
	}
	for tail > head && size+len(lines[tail-1])+1 <= max {
		size += len(lines[tail-1]) + 1
		tail--
	}
	if head == 0 {
		// One huge line: clip it by bytes.
		return Quote(Clip(text, max))
	}
	left := strings.Join(lines[head:tail], "\n")
	note := fmt.Sprintf("[… %d of the request's %d lines (%d of %d bytes) left out here; the whole request is in the session log …]",
		tail-head, len(lines), len(left), len(text))
	return Quote(strings.Join(lines[:head], "\n") + "\n" + note + "\n" + strings.Join(lines[tail:], "\n"))
}

// Quote writes text as a markdown block quote, line by line.
func Quote(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight("> "+l, " ")
	}
	return strings.Join(lines, "\n")
}
