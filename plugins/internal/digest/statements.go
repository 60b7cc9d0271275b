package digest

import (
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/compact-host/compact-host/abi"
)

// Statement is a sentence of the conversation kept verbatim.
type Statement struct {
	Index int
	Text  string
	// Reasoning is true for a sentence of the assistant's reasoning
	// (thinking blocks), which a summary labels as such: the agent
	// thought it, it did not tell the user.
	Reasoning bool
}

// Reasoning joins the thinking blocks of m by newlines: Claude thinking,
// Codex reasoning summaries and Copilot reasoning text, as the readers
// hand them over. Agents such as Copilot CLI put most of their words
// there, so causes, choices and plans are often stated nowhere else.
func Reasoning(m *abi.Message) string {
	var parts []string
	for _, b := range m.Content {
		if b.Type == abi.BlockThinking && strings.TrimSpace(b.Text) != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// assistantProse yields the sentences of an assistant message: its
// visible text, then its reasoning.
func assistantProse(m *abi.Message, yield func(s string, reasoning bool)) {
	for _, s := range sentences(m.Text()) {
		yield(s, false)
	}
	if r := Reasoning(m); r != "" {
		for _, s := range sentences(r) {
			yield(s, true)
		}
	}
}

var (
	// Sentences that record a choice and, often, its reason.
	decisionMarkers = newMarkerSet(
		"decided", "decision", "instead", "rather than", "chose ", "chosen", "going with", "go with", "switch to",
		"switched to", "the fix is", "the approach", "approach is", "must be", "opt-in", "opt in",
		"we'll use", "i'll use", "we will use", "will use ", "keep the ", "keeping the ", "drop the ", "dropping the ",
		"better to", "prefer ", "out of scope", "won't ", "not going to", "ruled out", "decided against",
	)
	// Sentences that state why something fails: rationale beside the
	// decisions, though not a choice.
	causeMarkers = newMarkerSet("root cause", "the issue is", "the problem is", "caused by", "fails because", "failed because")
	// Sentences that leave something open wherever they appear.
	openMarkers = newMarkerSet(
		"todo", "fixme", "still need", "not yet", "remaining", "pending", "follow-up", "follow up",
		"next step", "left to do", "later", "blocked",
	)
	// Any of the markers above: a sentence without one is neither a
	// decision, a cause nor an open item.
	statementMarkers = newMarkerSet(append(append(append([]string{}, decisionMarkers.list...), causeMarkers.list...), openMarkers.list...)...)
	// Sentences that announce work; open only when they come last.
	intentMarkers = newMarkerSet("i'll ", "i will ", "next,", "next ", "let me ", "we need to", "need to", "going to")
	// Sentences of the user that set a rule.
	constraintMarkers = newMarkerSet(
		"must", "should", "don't", "do not", "never", "always", "make sure", "without", "only ",
		"avoid", "no need", "required", "requirement", "keep ", "instead",
	)
)

// Decisions returns the assistant's sentences that state a decision or
// the cause the decisions answer (see Decision.Cause).
func Decisions(msgs []abi.Message) []Statement {
	decisions, _ := assistantStatements(msgs)
	return decisions
}

// OpenItems returns what the conversation leaves open: assistant sentences
// that mark unfinished work anywhere, and the announced next steps of the
// last assistant message that has text.
func OpenItems(msgs []abi.Message) []Statement {
	_, open := assistantStatements(msgs)
	return open
}

// assistantStatements returns Decisions and OpenItems from one pass over
// the assistant's sentences.
func assistantStatements(msgs []abi.Message) (decisions, open []Statement) {
	var scratch lowerer
	seenDecision, seenOpen := map[string]bool{}, map[string]bool{}
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == abi.RoleAssistant && strings.TrimSpace(msgs[i].Text()) != "" {
			last = i
			break
		}
	}
	for i := range msgs {
		if msgs[i].Role != abi.RoleAssistant {
			continue
		}
		assistantProse(&msgs[i], func(s string, reasoning bool) {
			lower := scratch.lower(s)
			if !hasMarker(lower, statementMarkers) && i != last {
				return // the usual sentence: one scan, not one per kind
			}
			if (hasMarker(lower, decisionMarkers) || hasMarker(lower, causeMarkers)) && !musing(lower) {
				decisions = appendStatement(decisions, Statement{i, s, reasoning}, seenDecision)
			}
			// Reasoning leaves work open where it says so ("still need");
			// its announcements are thoughts on the way, not plans.
			if hasMarker(lower, openMarkers) || (i == last && !reasoning && hasMarker(lower, intentMarkers)) {
				open = appendStatement(open, Statement{i, s, reasoning}, seenOpen)
			}
		})
	}
	return decisions, open
}

// musing reports whether lower, a sentence in lower case, opens as a
// thought the agent is still turning over ("But wait, …", "Hmm, …"):
// whatever it weighs, it has not chosen yet.
func musing(lower string) bool {
	for _, p := range []string{"but wait", "wait,", "wait.", "hmm", "hm,", "oh,", "oh wait", "ah,", "or maybe", "maybe "} {
		if strings.HasPrefix(lower, p) {
			return true
		}
	}
	return false
}

// Constraints returns the sentences of the user's requests that set rules.
func Constraints(msgs []abi.Message) []Statement { return constraintsOf(Requests(msgs)) }

// constraintsOf is Constraints of the requests already found.
func constraintsOf(reqs []Request) []Statement {
	var out []Statement
	seen := map[string]bool{}
	var scratch lowerer
	for _, r := range reqs {
		for _, s := range sentences(r.Text) {
			if hasMarker(scratch.lower(s), constraintMarkers) {
				out = appendStatement(out, Statement{Index: r.Index, Text: s}, seen)
			}
		}
	}
	return out
}

// appendStatement appends s unless its text is in seen, which it updates.
func appendStatement(list []Statement, s Statement, seen map[string]bool) []Statement {
	if seen[s.Text] {
		return list
	}
	seen[s.Text] = true
	return append(list, s)
}

// hasMarker reports whether lower, a sentence in lower case, holds one of
// markers.
func hasMarker(lower string, markers *markerSet) bool {
	for i := 0; i < len(lower); i++ {
		for _, m := range markers.byFirst[lower[i]] {
			if strings.HasPrefix(lower[i:], m) {
				return true
			}
		}
	}
	return false
}

// markerSet is a list of markers indexed by their first byte, so that
// hasMarker reads a sentence once instead of once per marker (in a wasm
// plugin, without the vector instructions strings.Contains has natively,
// that was a tenth of a summary).
type markerSet struct {
	list    []string
	byFirst [256][]string
}

func newMarkerSet(markers ...string) *markerSet {
	s := &markerSet{list: markers}
	for _, m := range markers {
		s.byFirst[m[0]] = append(s.byFirst[m[0]], m)
	}
	return s
}

// lowerer lowers texts for marker matching into one buffer it reuses, as
// strings.ToLower would (invalid UTF-8 aside, which no marker matches)
// but without an allocation per sentence. What lower returns is only
// valid until its next call.
type lowerer struct{ buf []byte }

func (l *lowerer) lower(s string) string {
	i := 0
	for i < len(s) && s[i] < utf8.RuneSelf && (s[i] < 'A' || s[i] > 'Z') {
		i++
	}
	if i == len(s) {
		return s
	}
	l.buf = append(l.buf[:0], s[:i]...)
	for _, r := range s[i:] {
		switch {
		case r >= 'A' && r <= 'Z':
			l.buf = append(l.buf, byte(r+'a'-'A'))
		case r < utf8.RuneSelf:
			l.buf = append(l.buf, byte(r))
		default:
			l.buf = utf8.AppendRune(l.buf, unicode.ToLower(r))
		}
	}
	return unsafe.String(unsafe.SliceData(l.buf), len(l.buf))
}

// sentences splits prose into sentences of 12 to 400 bytes, one line each.
// Code blocks, tables and headings are skipped: they are not statements.
func sentences(text string) []string {
	var out []string
	inCode := false
	for line := range strings.SplitSeq(text, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "```") {
			inCode = !inCode
			continue
		}
		if inCode || t == "" || strings.HasPrefix(t, "|") || strings.HasPrefix(t, "#") || strings.HasPrefix(line, "    ") {
			continue
		}
		t = trimListMarker(t)
		start := 0
		for i := 0; i < len(t); i++ {
			switch t[i] {
			case '.', '!', '?':
				if sentenceEnd(t, i) {
					out = appendSentence(out, t[start:i+1])
					start = i + 1
				}
			}
		}
		out = appendSentence(out, t[start:])
	}
	return out
}

// trimListMarker removes the list or quote markers a line opens with,
// leaving emphasis ("**Root cause**: …") alone.
func trimListMarker(t string) string {
	for {
		switch {
		case strings.HasPrefix(t, "- "), strings.HasPrefix(t, "* "), strings.HasPrefix(t, "> "):
			t = strings.TrimSpace(t[2:])
		case strings.HasPrefix(t, "• "):
			t = strings.TrimSpace(t[len("• "):])
		case t == "-" || t == "*" || t == ">":
			return ""
		default:
			i := 0
			for i < len(t) && t[i] >= '0' && t[i] <= '9' {
				i++
			}
			if i > 0 && i+1 < len(t) && (t[i] == '.' || t[i] == ')') && t[i+1] == ' ' {
				t = strings.TrimSpace(t[i+2:])
				continue
			}
			return t
		}
	}
}

func appendSentence(out []string, s string) []string {
	s = strings.TrimSpace(s)
	if len(s) < 12 || len(s) > 400 {
		return out
	}
	return append(out, s)
}

// sentenceEnd reports whether the punctuation at s[i] ends a sentence: it
// is last, or followed by a space and a word that does not start in lower
// case (so "./... passes" and "e.g. this" do not split).
func sentenceEnd(s string, i int) bool {
	if i+1 == len(s) {
		return true
	}
	if s[i+1] != ' ' {
		return false
	}
	j := i + 1
	for j < len(s) && s[j] == ' ' {
		j++
	}
	return j == len(s) || !(s[j] >= 'a' && s[j] <= 'z')
}

// Decision is a stated decision, labelled when it was turned down.
type Decision struct {
	Statement
	// Rejected says how the option was turned down: by the assistant's
	// own words, or by the user's answer, quoted. "" for a decision taken.
	Rejected string
	// Reason is true when the sentence gives its reason.
	Reason bool
	// Cause is true for a sentence that states why something fails and
	// makes no choice: rationale for the decisions, not one of them.
	Cause bool
}

var (
	rejectMarkers = newMarkerSet("rejected", "ruled out", "decided against", "won't work", "will not work", "doesn't work", "does not work", "not an option", "abandon", "dropped the idea", "gave up on")
	reasonMarkers = newMarkerSet("because", "since ", "so that", "to avoid", "in order to", "as it ", "which means", "otherwise")
	// Openings of a user's answer that turn down what was proposed.
	refusalOpenings = []string{"no ", "no,", "no.", "nope", "don't", "do not", "dont ", "stop", "revert", "undo", "not like that", "that's wrong", "that is wrong", "wrong", "remove this", "remove that", "instead", "rather ", "never ", "not that"}
)

// ClassifyDecisions labels decisions: complete sentences only, those
// that state an option was ruled out marked rejected, and those of an
// assistant turn the user answered with a refusal marked as turned down
// by the user.
func ClassifyDecisions(statements []Statement, reqs []Request) []Decision {
	var out []Decision
	next := 0 // the first request after the statement; statements come in order
	for _, s := range statements {
		if !completeSentence(s.Text) {
			continue
		}
		lower := strings.ToLower(s.Text)
		d := Decision{Statement: Statement{Index: s.Index, Text: Plain(s.Text), Reasoning: s.Reasoning}, Reason: hasMarker(lower, reasonMarkers),
			Cause: !hasMarker(lower, decisionMarkers)}
		if hasMarker(lower, rejectMarkers) {
			d.Rejected = "ruled out by the assistant"
		}
		for next < len(reqs) && reqs[next].Index <= s.Index {
			next++
		}
		if next < len(reqs) && refusal(reqs[next].Text) {
			d.Rejected = "turned down by the user: “" + Plain(ClipHead(OneLine(reqs[next].Text), 160)) + "”"
		}
		out = append(out, d)
	}
	return out
}

func refusal(text string) bool {
	t := strings.ToLower(strings.TrimSpace(text))
	if len(t) > 600 {
		return false
	}
	for _, o := range refusalOpenings {
		if strings.HasPrefix(t, o) {
			return true
		}
	}
	return false
}

// completeSentence reports whether s reads as a whole statement: six
// words or more, not an introduction to what follows (a trailing colon),
// starting as a sentence starts.
func completeSentence(s string) bool {
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, ":") || len(strings.Fields(s)) < 6 {
		return false
	}
	c := s[0]
	return c >= 'A' && c <= 'Z' || c == '`' || c == '*' || c >= '0' && c <= '9' || c >= 0x80
}

// Words of a sentence that reports something found or established.
var findingMarkers = newMarkerSet(
	"confirmed", "found ", "is registered", "are registered", "root cause", "the issue is", "the problem is",
	"turns out", "pre-existing", "already broken", "caused by", "fails because", "failed because", "is defined in",
	"lives in", "pushed", "committed", "merged", "created pr", "opened pr", "pull request", "expired", "401", "403",
)

// Findings returns the assistant's sentences that report something
// established along the way: a marker of a finding, a commit hash, a URL,
// a PR or issue number, or a file:line position. Decisions are left out:
// they are listed as such.
func Findings(msgs []abi.Message, decisions []Statement) []Statement {
	taken := map[string]bool{}
	for _, d := range decisions {
		taken[d.Text] = true
	}
	var scratch lowerer
	var out []Statement
	seen := map[string]bool{}
	for i := range msgs {
		if msgs[i].Role != abi.RoleAssistant {
			continue
		}
		assistantProse(&msgs[i], func(s string, reasoning bool) {
			if taken[s] || len(strings.Fields(s)) < 4 && !hasArtifact(s) {
				return
			}
			if hasMarker(scratch.lower(s), findingMarkers) || hasArtifact(s) {
				out = appendStatement(out, Statement{i, s, reasoning}, seen)
			}
		})
	}
	return out
}

// hasArtifact reports whether s names a commit hash (7 to 40 hex digits
// with a letter and a digit), a URL, an issue or PR number or a file:line.
func hasArtifact(s string) bool {
	if strings.Contains(s, "://") {
		return true
	}
	for _, w := range strings.FieldsFunc(s, func(r rune) bool {
		return r == ' ' || r == '`' || r == '(' || r == ')' || r == ',' || r == ';' || r == '"' || r == '\''
	}) {
		w = strings.TrimRight(w, ".:!?")
		if isHash(w) {
			return true
		}
		if len(w) > 1 && w[0] == '#' && allDigits(w[1:]) {
			return true
		}
		if i := strings.LastIndexByte(w, ':'); i > 0 && i+1 < len(w) && allDigits(strings.Split(w[i+1:], "-")[0]) && strings.Contains(w[:i], ".") {
			return true
		}
	}
	return false
}

func isHash(w string) bool {
	if len(w) < 7 || len(w) > 40 {
		return false
	}
	letter, digit := false, false
	for i := 0; i < len(w); i++ {
		switch c := w[i]; {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'a' && c <= 'f':
			letter = true
		default:
			return false
		}
	}
	return letter && digit
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Gist returns the leading sentences of a message, on one line, up to max
// bytes, passing over the opening courtesies ("Done.", "Good question.").
func Gist(text string, max int) string {
	var parts []string
	size := 0
	all := sentences(text)
	lead := 0 // the courtesies to pass over, when something follows them
	for lead < len(all) && len(strings.Fields(all[lead])) < 3 {
		lead++
	}
	if lead == len(all) {
		lead = 0
	}
	for _, s := range all[lead:] {
		if size > 0 && size+len(s)+1 > max {
			break
		}
		parts = append(parts, s)
		size += len(s) + 1
	}
	if len(parts) == 0 {
		return FirstSentence(text, max)
	}
	return ClipHead(strings.Join(parts, " "), max)
}
