package digest

import (
	"strings"
)

// Section is one "## Title" part of a markdown summary.
type Section struct {
	Title string
	Body  string
}

// ParseSections splits a markdown summary at its level-two headings. Text
// before the first heading becomes a section with an empty title.
func ParseSections(s string) []Section {
	var out []Section
	cur := Section{}
	var body []string
	flush := func() {
		cur.Body = strings.TrimSpace(strings.Join(body, "\n"))
		if cur.Title != "" || cur.Body != "" {
			out = append(out, cur)
		}
		body = nil
	}
	inCode := false
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inCode = !inCode
		}
		if !inCode && strings.HasPrefix(line, "## ") {
			flush()
			cur = Section{Title: strings.TrimSpace(strings.TrimPrefix(line, "## "))}
			continue
		}
		body = append(body, line)
	}
	flush()
	return out
}

// TitleKey normalises a heading for comparison: lower case, "&" and "and"
// the same, punctuation and markup ignored.
func TitleKey(title string) string {
	t := strings.ToLower(title)
	t = strings.ReplaceAll(t, "&", " and ")
	var b strings.Builder
	for _, r := range t {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == ' ' {
			b.WriteRune(r)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// Find returns the body of the section titled title and whether it exists.
func Find(sections []Section, title string) (string, bool) {
	key := TitleKey(title)
	for _, s := range sections {
		if TitleKey(s.Title) == key {
			return s.Body, true
		}
	}
	return "", false
}

// Lines returns the non-empty lines of a section body.
func Lines(body string) []string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, strings.TrimRight(l, " \r"))
		}
	}
	return out
}
