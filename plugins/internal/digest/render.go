package digest

import (
	"fmt"
	"strings"

	"github.com/compact-host/compact-host/abi"
)

// Transcript delimiters. The summarizer prompt tells the model that what
// lies between them is data to summarize, not a conversation to continue.
const (
	TranscriptOpen  = "<transcript>"
	TranscriptClose = "</transcript>"
)

// Render writes msgs as a plain-text transcript for a summarizer prompt,
// at most maxBytes long (0: no limit). Tool inputs and outputs are clipped
// first, harder and harder, then the oldest messages give way; user and
// assistant text is kept whole as long as possible. Thinking blocks and
// images are left out.
func Render(msgs []abi.Message, maxBytes int) string {
	for _, caps := range []renderCaps{
		{text: 12000, input: 1500, output: 3000},
		{text: 6000, input: 600, output: 1000},
		{text: 3000, input: 300, output: 300},
		{text: 1500, input: 160, output: 120},
	} {
		s := render(msgs, caps)
		if maxBytes <= 0 || len(s) <= maxBytes {
			return s
		}
	}
	// Still too long: keep the first message (usually the task) and as
	// many of the last messages as fit.
	caps := renderCaps{text: 1500, input: 160, output: 120}
	head := render(msgs[:1], caps)
	var tail []string
	size := len(head)
	for i := len(msgs) - 1; i > 0; i-- {
		s := render(msgs[i:i+1], caps)
		if size+len(s)+80 > maxBytes {
			tail = append(tail, fmt.Sprintf("[… %d messages left out …]\n\n", i))
			break
		}
		size += len(s)
		tail = append(tail, s)
	}
	var b strings.Builder
	b.WriteString(head)
	for i := len(tail) - 1; i >= 0; i-- {
		b.WriteString(tail[i])
	}
	return cutRunes(b.String(), maxBytes)
}

type renderCaps struct{ text, input, output int }

func render(msgs []abi.Message, caps renderCaps) string {
	names := map[string]string{}
	var b strings.Builder
	for _, m := range msgs {
		role := m.Role
		if m.Summary {
			role += ", earlier summary"
		}
		for _, blk := range m.Content {
			switch blk.Type {
			case abi.BlockText:
				if strings.TrimSpace(blk.Text) == "" {
					continue
				}
				fmt.Fprintf(&b, "[%s]\n%s\n\n", role, Clip(strings.TrimSpace(WithoutImages(blk.Text)), caps.text))
			case abi.BlockToolUse:
				names[blk.ID] = blk.Name
				fmt.Fprintf(&b, "[%s calls %s]\n%s\n\n", role, blk.Name, Clip(strings.TrimSpace(string(blk.Input)), caps.input))
			case abi.BlockToolResult:
				name := names[blk.ToolUseID]
				if name == "" {
					name = "tool"
				}
				status := "result"
				if blk.IsError {
					status = "error"
				}
				fmt.Fprintf(&b, "[%s %s]\n%s\n\n", name, status, Clip(strings.TrimSpace(WithoutImages(blk.Text)), caps.output))
			case abi.BlockImage:
				fmt.Fprintf(&b, "[%s attached an image: %s]\n\n", role, ImageNote{MediaType: blk.MediaType, Bytes: len(blk.Data)})
			}
		}
	}
	return b.String()
}
