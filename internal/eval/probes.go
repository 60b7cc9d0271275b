package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/compact-host/compact-host/abi"
)

// Probe categories: what a summary must keep for the agent to go on.
const (
	// CategoryFact is something learnt before the point: a cause, a
	// value, a command's result, a constraint of the task.
	CategoryFact = "fact"
	// CategoryFileChange is a file the agent changed and what it changed
	// in it.
	CategoryFileChange = "file_change"
	// CategoryNextStep is what was still to do at the point, as the
	// session says so before it.
	CategoryNextStep = "next_step"
	// CategoryDecision is a choice made before the point, by the user or
	// the agent, that later work must respect.
	CategoryDecision = "decision"
)

// ProbeCategories lists the categories in the order reports show them.
var ProbeCategories = []string{CategoryFact, CategoryFileChange, CategoryNextStep, CategoryDecision}

// Limits on probe files, so that a wrong path cannot make eval read a
// session log as probes.
const (
	maxProbeFileBytes = 1 << 20
	maxProbePattern   = 500
)

// ErrBadProbes is wrapped by every error about a probe file's content.
var ErrBadProbes = errors.New("eval: bad probe file")

// ProbeSet is the probes of one session: the points where a compaction
// folds everything before, and what the summary made there must answer.
// The file format is documented in testdata/probes/README.md.
type ProbeSet struct {
	// Session is the session's file name, looked up in the corpus or
	// among the sessions given.
	Session     string       `json:"session"`
	Description string       `json:"description,omitempty"`
	Points      []ProbePoint `json:"points"`
	// File is where the set was read from.
	File string `json:"-"`
}

// ProbePoint is one compaction point: the summary folds messages [0, At).
// After, when set, names the point by a stable marker instead: At is the
// index just past the first message whose text contains it (whitespace
// folded, case-insensitive). With both set they must agree, which catches
// a reader change that shifts indexes.
type ProbePoint struct {
	ID     string  `json:"id"`
	At     int     `json:"at,omitempty"`
	After  string  `json:"after,omitempty"`
	Note   string  `json:"note,omitempty"`
	Probes []Probe `json:"probes"`
}

// Probe is one question about the folded history and its ground truth as
// a deterministic matcher over the summary text. Every condition given
// must hold: each of AllOf occurs, at least one of AnyOf occurs, each of
// Regex matches, and for a file change Path occurs. Substrings compare
// case-insensitively with whitespace folded and backticks dropped; regexes
// run case-insensitively on the text with whitespace folded and backticks
// dropped.
type Probe struct {
	ID       string `json:"id"`
	Category string `json:"category"`
	// Question is for people reading a report.
	Question string `json:"question"`
	// Evidence lists the message indexes that establish the ground truth.
	Evidence []int `json:"evidence,omitempty"`
	// Path is the file a file_change probe is about, as a suffix that any
	// way of writing it (absolute, project-relative) contains.
	Path  string   `json:"path,omitempty"`
	AllOf []string `json:"all_of,omitempty"`
	AnyOf []string `json:"any_of,omitempty"`
	Regex []string `json:"regex,omitempty"`

	res []*regexp.Regexp
}

// LoadProbes reads a probe file, or every *.json file of a directory,
// sorted by name, and checks them.
func LoadProbes(path string) ([]*ProbeSet, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	files := []string{path}
	if st.IsDir() {
		if files, err = filepath.Glob(filepath.Join(path, "*.json")); err != nil {
			return nil, err
		}
		sort.Strings(files)
		if len(files) == 0 {
			return nil, fmt.Errorf("%w: %s holds no *.json probe file", ErrBadProbes, path)
		}
	}
	var sets []*ProbeSet
	for _, f := range files {
		s, err := readProbeFile(f)
		if err != nil {
			return nil, err
		}
		sets = append(sets, s)
	}
	return sets, nil
}

func readProbeFile(path string) (*ProbeSet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxProbeFileBytes {
		return nil, fmt.Errorf("%w: %s: %d bytes, over the %d-byte limit of a probe file", ErrBadProbes, path, st.Size(), maxProbeFileBytes)
	}
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var s ProbeSet
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadProbes, path, err)
	}
	s.File = path
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadProbes, path, err)
	}
	return &s, nil
}

// check validates a set without its session: categories, matchers,
// unique IDs. Points are checked against the session by Resolve.
func (s *ProbeSet) check() error {
	if s.Session == "" || filepath.Base(s.Session) != s.Session {
		return fmt.Errorf("session %q: want the session's file name, without a directory", s.Session)
	}
	if len(s.Points) == 0 {
		return errors.New("no points")
	}
	ids := map[string]bool{}
	for pi := range s.Points {
		p := &s.Points[pi]
		if p.ID == "" {
			return fmt.Errorf("points[%d]: no id", pi)
		}
		if p.At < 0 || (p.At == 0 && p.After == "") {
			return fmt.Errorf("point %q: want \"at\" (a message index, > 0) or \"after\" (a marker)", p.ID)
		}
		if len(p.Probes) == 0 {
			return fmt.Errorf("point %q: no probes", p.ID)
		}
		for qi := range p.Probes {
			q := &p.Probes[qi]
			key := p.ID + "/" + q.ID
			if q.ID == "" {
				return fmt.Errorf("point %q probes[%d]: no id", p.ID, qi)
			}
			if ids[key] {
				return fmt.Errorf("probe %s: id used twice", key)
			}
			ids[key] = true
			if err := q.compile(); err != nil {
				return fmt.Errorf("probe %s: %v", key, err)
			}
		}
	}
	return nil
}

func (q *Probe) compile() error {
	known := false
	for _, c := range ProbeCategories {
		known = known || q.Category == c
	}
	if !known {
		return fmt.Errorf("category %q: want one of %s", q.Category, strings.Join(ProbeCategories, ", "))
	}
	if q.Question == "" {
		return errors.New("no question")
	}
	if q.Category == CategoryFileChange && (q.Path == "" || len(q.AnyOf)+len(q.AllOf)+len(q.Regex) == 0) {
		return errors.New("a file_change probe needs \"path\" and a change to find (any_of, all_of or regex)")
	}
	if q.Path == "" && len(q.AnyOf)+len(q.AllOf)+len(q.Regex) == 0 {
		return errors.New("no matcher: give any_of, all_of, regex or path")
	}
	for _, s := range append(append([]string{q.Path}, q.AllOf...), q.AnyOf...) {
		if len(s) > maxProbePattern {
			return fmt.Errorf("pattern %.40q…: over %d bytes", s, maxProbePattern)
		}
	}
	for _, s := range append(q.AllOf, q.AnyOf...) {
		if normalize(s) == "" {
			return errors.New("an empty substring matches everything")
		}
	}
	q.res = q.res[:0]
	for _, r := range q.Regex {
		if len(r) > maxProbePattern {
			return fmt.Errorf("regex %.40q…: over %d bytes", r, maxProbePattern)
		}
		re, err := regexp.Compile("(?i)" + r)
		if err != nil {
			return fmt.Errorf("regex %q: %v", r, err)
		}
		q.res = append(q.res, re)
	}
	return nil
}

// Resolve sets At of every point from its marker and checks every point
// against the session's messages.
func (s *ProbeSet) Resolve(msgs []abi.Message) error {
	for pi := range s.Points {
		p := &s.Points[pi]
		if p.After != "" {
			at, ok := findMarker(msgs, p.After)
			if !ok {
				return fmt.Errorf("%w: %s: point %q: no message contains the marker %q", ErrBadProbes, s.File, p.ID, p.After)
			}
			if p.At != 0 && p.At != at {
				return fmt.Errorf("%w: %s: point %q: \"at\" is %d but the marker %q ends message %d (at %d); fix one of them",
					ErrBadProbes, s.File, p.ID, p.At, p.After, at-1, at)
			}
			p.At = at
		}
		if p.At > len(msgs) {
			return fmt.Errorf("%w: %s: point %q: at %d, but the session has %d messages", ErrBadProbes, s.File, p.ID, p.At, len(msgs))
		}
	}
	return nil
}

func findMarker(msgs []abi.Message, marker string) (int, bool) {
	want := normalize(marker)
	for i := range msgs {
		if strings.Contains(normalize(ContextText(msgs[i:i+1])), want) {
			return i + 1, true
		}
	}
	return 0, false
}

// Answered reports whether text satisfies the probe's matcher.
func (q *Probe) Answered(text string) bool {
	if len(q.res) != len(q.Regex) {
		if err := q.compile(); err != nil {
			return false
		}
	}
	return q.answered(normalize(text), foldProbe(text))
}

// answered takes the text normalized (for substrings) and whitespace
// folded (for regexes), computed once per summary.
func (q *Probe) answered(norm, folded string) bool {
	if q.Path != "" && !strings.Contains(norm, normalize(q.Path)) {
		return false
	}
	for _, s := range q.AllOf {
		if !strings.Contains(norm, normalize(s)) {
			return false
		}
	}
	if len(q.AnyOf) > 0 {
		any := false
		for _, s := range q.AnyOf {
			if strings.Contains(norm, normalize(s)) {
				any = true
				break
			}
		}
		if !any {
			return false
		}
	}
	for _, re := range q.res {
		if !re.MatchString(folded) {
			return false
		}
	}
	return true
}

// normalize is the form substrings compare in: foldProbe, lower case.
func normalize(s string) string { return strings.ToLower(foldProbe(s)) }

// foldProbe is the form regexes run on: backticks (Markdown code marks,
// which a summary may or may not add around a name) dropped, whitespace
// folded to single spaces.
func foldProbe(s string) string { return foldSpace(strings.ReplaceAll(s, "`", "")) }
