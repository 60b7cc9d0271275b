package digest

import (
	"fmt"
	"strings"

	"github.com/compact-host/compact-host/abi"
)

// ImageNote is an image the folded messages carried, which no summary
// keeps: its kind and size say what was there.
type ImageNote struct {
	Index     int
	Role      string
	MediaType string
	// Bytes is the image's size: decoded, or of its base64 text.
	Bytes int
}

// String describes the image in a few words.
func (n ImageNote) String() string {
	kind := n.MediaType
	if kind == "" {
		kind = "image"
	}
	return fmt.Sprintf("%s, %s", kind, byteSize(n.Bytes))
}

// minInlineImage is the shortest base64 run in text taken for an image.
const minInlineImage = 1024

// Images lists the images of msgs: image blocks, and base64 data URLs
// ("data:image/png;base64,…") inside text and tool results.
func Images(msgs []abi.Message) []ImageNote {
	var out []ImageNote
	for i, m := range msgs {
		for _, b := range m.Content {
			switch b.Type {
			case abi.BlockImage:
				out = append(out, ImageNote{Index: i, Role: m.Role, MediaType: b.MediaType, Bytes: len(b.Data)})
			case abi.BlockText, abi.BlockToolResult:
				for _, u := range dataURLs(b.Text) {
					out = append(out, ImageNote{Index: i, Role: m.Role, MediaType: u.kind, Bytes: u.end - u.start})
				}
			}
		}
	}
	return out
}

type dataURL struct {
	start, end int
	kind       string
}

// dataURLs finds the base64 data URLs of s at least minInlineImage long.
func dataURLs(s string) []dataURL {
	var out []dataURL
	for from := 0; ; {
		i := strings.Index(s[from:], "data:")
		if i < 0 {
			return out
		}
		i += from
		head, _, ok := strings.Cut(s[i:min(len(s), i+100)], ";base64,")
		if !ok || strings.ContainsAny(head, " \n\"'") {
			from = i + 5
			continue
		}
		start := i + len(head) + len(";base64,")
		end := start
		for end < len(s) && isBase64(s[end]) {
			end++
		}
		if end-start >= minInlineImage {
			out = append(out, dataURL{start: i, end: end, kind: strings.TrimPrefix(head, "data:")})
		}
		from = end
	}
}

func isBase64(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '='
}

// WithoutImages replaces each base64 data URL of s by a note of its kind
// and size.
func WithoutImages(s string) string {
	urls := dataURLs(s)
	if len(urls) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, u := range urls {
		b.WriteString(s[last:u.start])
		fmt.Fprintf(&b, "[%s data left out, %s of base64]", u.kind, byteSize(u.end-u.start))
		last = u.end
	}
	b.WriteString(s[last:])
	return b.String()
}

func byteSize(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
