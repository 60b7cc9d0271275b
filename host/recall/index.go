package recall

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/compact-host/compact-host/abi"
)

// Limits of Recall and Search.
const (
	// PageBytes is the size of one page of Recall.
	PageBytes = 16 << 10
	// MaxPages bounds the pages of one original: past them, the rest is
	// named, not shown.
	MaxPages = 64
	// MaxQueryBytes bounds a Search query.
	MaxQueryBytes = 1 << 10
	// MaxHits bounds the hits of one Search.
	MaxHits = 50
	// DefaultHits is the hits of a Search that asks for none.
	DefaultHits = 10
	// snippetBytes is the text either side of a hit in its snippet.
	snippetBytes = 120
)

// Errors of Recall and Search. Their text is meant for the model: it says
// what to do next, and never where the originals live.
var (
	// ErrUnknownRef: the reference has the form of a marker but names
	// nothing in this conversation (another conversation's or tenant's
	// marker gets this too).
	ErrUnknownRef = errors.New("recall: no such marker in this conversation; use a [recall:…] reference from this conversation's summary, or search")
	// ErrBadRef: the reference does not have the form of a marker.
	ErrBadRef = errors.New(`recall: not a marker reference; give the part inside [recall:…], such as "s-1a2b…" or "t-3c4d…"`)
	// ErrPage: the page is past the original's last page.
	ErrPage = errors.New("recall: no such page")
	// ErrQuery: the query is empty, too long or not a valid regular expression.
	ErrQuery = errors.New("recall: bad query")
)

// Index is a conversation's originals, ready for Recall and Search. It is
// read-only once built, and safe for concurrent use.
type Index struct {
	msgs []abi.Message
	keys []Key
	// halves maps a span half (one message's ID under one key) to the
	// message's index + 1; tools maps a tool-output reference to the index of
	// the message holding the output and the block.
	halves map[string]int
	tools  map[string]loc
	// text is every block's searchable text, joined, and lower-cased in
	// lower; docs are the blocks' starting offsets in order.
	text, lower string
	docs        []doc
	// freq counts each byte of lower: a substring search scans for the
	// query's rarest byte, which stops least often.
	freq [256]int
	// grams are the chunk filters of lower (see chunkFilters).
	grams []uint64
}

type loc struct{ msg, block int }

type doc struct {
	start int
	loc
}

// New indexes msgs, the conversation's originals in order, for markers
// made under any of keys: the first key makes the references Search gives.
// A conversation read from a file the agent compacted has a key for each
// context the agent started from (see KeysFor).
func New(msgs []abi.Message, keys ...Key) *Index {
	x := &Index{msgs: msgs, keys: keys, halves: map[string]int{}, tools: map[string]loc{}}
	var b strings.Builder
	for i := range msgs {
		for _, k := range keys {
			if h := k.mac("s", x.id(i), halfHex); x.halves[h] == 0 {
				x.halves[h] = i + 1
			}
		}
		for j, blk := range msgs[i].Content {
			text := blk.Text
			switch blk.Type {
			case abi.BlockToolResult:
				for _, k := range keys {
					x.tools[k.ToolRef(blk.ToolUseID)] = loc{i, j}
				}
			case abi.BlockToolUse:
				text = blk.Name + " " + string(blk.Input)
			case abi.BlockImage:
				continue
			}
			if text == "" {
				continue
			}
			x.docs = append(x.docs, doc{b.Len(), loc{i, j}})
			b.WriteString(text)
			b.WriteByte(0)
		}
	}
	x.text = b.String()
	// ASCII only is folded: a rune whose lower case has another UTF-8
	// length would move every offset after it.
	x.lower = asciiLower(x.text)
	for i := 0; i < len(x.lower); i++ {
		x.freq[x.lower[i]]++
	}
	x.grams = chunkFilters(x.lower)
	return x
}

// id is the ID of msgs[i] for span references: its own, or for a message
// read without one, its place, so that search hits can still be recalled.
func (x *Index) id(i int) string {
	if id := x.msgs[i].ID; id != "" {
		return id
	}
	return "#" + strconv.Itoa(i)
}

// KeysFor are the keys a conversation's markers may be made under: one for
// the start of the whole history, and one for each summary in it or in
// views (the contexts the agent resumed from after compacting its file),
// where a compaction of that context began.
func KeysFor(history []abi.Message, views ...[]abi.Message) []Key {
	var keys []Key
	add := func(k Key) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	if k, ok := KeyFor(history); ok {
		add(k)
	}
	for _, v := range append([][]abi.Message{history}, views...) {
		if k, ok := KeyFor(v); ok {
			add(k)
		}
		for i := range v {
			m := &v[i]
			if m.Role == abi.RoleUser && (m.Summary || abi.IsSummaryText(m.Text()) || strings.HasPrefix(strings.TrimSpace(m.Text()), "[Context compacted")) {
				add(keyOf(m))
			}
		}
	}
	return keys
}

// Page is one page of an original.
type Page struct {
	Ref string `json:"ref"`
	// Page counts from 1; Pages is how many there are.
	Page  int    `json:"page"`
	Pages int    `json:"pages"`
	Text  string `json:"text"`
	// Bytes is the size of the whole original as rendered.
	Bytes int `json:"bytes"`
	// Truncated is true when the original is longer than MaxPages pages.
	Truncated bool `json:"truncated,omitempty"`
}

// Recall returns page (from 1) of the original behind ref: the messages of
// a span, or one tool call and its output.
func (x *Index) Recall(ref string, page int) (Page, error) {
	if !abi.ValidRef(ref) {
		return Page{}, ErrBadRef
	}
	var text string
	switch ref[0] {
	case 't':
		l, ok := x.tools[ref]
		if !ok {
			return Page{}, ErrUnknownRef
		}
		text = x.renderTool(l)
	case 's':
		if len(ref) != 2+2*halfHex {
			return Page{}, ErrUnknownRef
		}
		from, to := x.halves[ref[2:2+halfHex]], x.halves[ref[2+halfHex:]]
		if from == 0 || to == 0 || from > to {
			return Page{}, ErrUnknownRef
		}
		text = x.render(from-1, to)
	}
	pages := max(1, (len(text)+PageBytes-1)/PageBytes)
	p := Page{Ref: ref, Page: page, Pages: min(pages, MaxPages), Bytes: len(text), Truncated: pages > MaxPages}
	if page < 1 || page > p.Pages {
		return Page{}, fmt.Errorf("%w: page %d of %d", ErrPage, page, p.Pages)
	}
	start := runeStart(text, (page-1)*PageBytes)
	end := runeStart(text, min(len(text), page*PageBytes))
	p.Text = text[start:end]
	switch {
	case page < p.Pages:
		p.Text += "\n[page " + strconv.Itoa(page) + " of " + strconv.Itoa(p.Pages) + "; ask for page " + strconv.Itoa(page+1) + " for more]"
	case p.Truncated:
		p.Text += "\n[the original goes on for " + strconv.Itoa(len(text)-end) + " more bytes, past the last page shown; search for what you need in it]"
	}
	return p, nil
}

func runeStart(s string, i int) int {
	return len(clip(s, i))
}

// render writes msgs[from:to] as text.
func (x *Index) render(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		m := &x.msgs[i]
		b.WriteString("--- " + m.Role)
		if m.ID != "" {
			b.WriteString(" (" + m.ID + ")")
		}
		b.WriteString("\n")
		for j := range m.Content {
			x.renderBlock(&b, loc{i, j})
		}
	}
	return b.String()
}

func (x *Index) renderBlock(b *strings.Builder, l loc) {
	blk := &x.msgs[l.msg].Content[l.block]
	switch blk.Type {
	case abi.BlockText, abi.BlockThinking:
		b.WriteString(blk.Text + "\n")
	case abi.BlockToolUse:
		b.WriteString("[tool call " + blk.Name + " " + blk.ID + "] " + string(blk.Input) + "\n")
	case abi.BlockToolResult:
		b.WriteString("[tool output " + blk.ToolUseID + "]\n" + blk.Text + "\n")
	case abi.BlockImage:
		b.WriteString("[image " + blk.MediaType + ", " + strconv.Itoa(len(blk.Data)) + " bytes]\n")
	}
}

// renderTool writes a tool output with the call that asked for it.
func (x *Index) renderTool(l loc) string {
	var b strings.Builder
	id := x.msgs[l.msg].Content[l.block].ToolUseID
	for i := l.msg; i >= 0 && i >= l.msg-64; i-- {
		if j := slices.IndexFunc(x.msgs[i].Content, func(blk abi.Block) bool { return blk.Type == abi.BlockToolUse && blk.ID == id }); j >= 0 {
			x.renderBlock(&b, loc{i, j})
			break
		}
	}
	x.renderBlock(&b, l)
	return b.String()
}

// docAt is the index of the doc holding offset at.
func (x *Index) docAt(at int) int {
	i, found := slices.BinarySearchFunc(x.docs, at, func(d doc, at int) int { return d.start - at })
	if !found {
		i--
	}
	return i
}

func (x *Index) hit(l loc, n, at int) Hit {
	m := &x.msgs[l.msg]
	blk := &m.Content[l.block]
	h := Hit{Role: m.Role, Matches: n}
	var k Key
	if len(x.keys) > 0 {
		k = x.keys[0]
	}
	if blk.Type == abi.BlockToolResult {
		h.Ref = k.ToolRef(blk.ToolUseID)
		h.Tool = x.toolName(l.msg, blk.ToolUseID)
	} else {
		h.Ref = k.SpanRef(x.id(l.msg), x.id(l.msg))
		if blk.Type == abi.BlockToolUse {
			h.Tool = blk.Name
		}
	}
	// The snippet: the text around the match, within the block.
	d := x.docAt(at)
	start := x.docs[d].start
	end := len(x.text) - 1
	if d+1 < len(x.docs) {
		end = x.docs[d+1].start - 1
	}
	from := max(start, at-snippetBytes)
	to := min(end, at+snippetBytes)
	from = runeStart(x.text, from)
	to = runeStart(x.text, to)
	h.Snippet = strings.Join(strings.Fields(x.text[from:to]), " ")
	return h
}

func (x *Index) toolName(from int, id string) string {
	for i := from; i >= 0 && i >= from-64; i-- {
		for _, blk := range x.msgs[i].Content {
			if blk.Type == abi.BlockToolUse && blk.ID == id {
				return blk.Name
			}
		}
	}
	return ""
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
