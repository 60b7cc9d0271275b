package digest

import (
	"slices"
	"strings"
	"testing"
)

// textCases hold the whitespace and case the fast paths of OneLine,
// lowerer and commandSegments must treat as their plain forms do.
var textCases = []string{
	"", " ", "a", "a b", " a", "a ", "a  b", "a\tb", "a\nb\n", "\u00a0x\u2003y\u0085",
	"already one line", "x\xffy  z", "Ünïcödé  TEXT", "KELVIN \u212a and İ", "ls && cd x || y; z\nw",
	"a&&&b", "a|||b", ";;", "echo 'a;b' | tee out.txt", "Now I'll FIX it.",
}

func FuzzOneLineIsJoinedFields(f *testing.F) {
	for _, s := range textCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := OneLine(s), strings.Join(strings.Fields(s), " "); got != want {
			t.Fatalf("OneLine(%q) = %q, want %q", s, got, want)
		}
	})
}

func FuzzLowererMatchesToLowerOnMarkers(f *testing.F) {
	for _, s := range textCases {
		f.Add(s)
	}
	markers := slices.Concat(decisionMarkers.list, openMarkers.list, intentMarkers.list, constraintMarkers.list, findingMarkers.list, []string{"i", "k", "it."})
	var l lowerer
	f.Fuzz(func(t *testing.T, s string) {
		got, want := l.lower(s), strings.ToLower(s)
		for _, m := range markers {
			if strings.Contains(got, m) != strings.Contains(want, m) {
				t.Fatalf("lower(%q) = %q and ToLower %q disagree on %q", s, got, want, m)
			}
		}
		if strings.ToValidUTF8(s, "\uFFFD") == s && got != want {
			t.Fatalf("lower(%q) = %q, want %q", s, got, want)
		}
	})
}

func FuzzHasMarkerIsContainsAny(f *testing.F) {
	for _, s := range textCases {
		f.Add(strings.ToLower(s))
	}
	f.Add("the root cause is x")
	f.Add("fails because")
	sets := []*markerSet{decisionMarkers, openMarkers, intentMarkers, constraintMarkers, findingMarkers, rejectMarkers, reasonMarkers}
	f.Fuzz(func(t *testing.T, s string) {
		for _, set := range sets {
			want := slices.ContainsFunc(set.list, func(m string) bool { return strings.Contains(s, m) })
			if got := hasMarker(s, set); got != want {
				t.Fatalf("hasMarker(%q, %q) = %v, want %v", s, set.list, got, want)
			}
		}
	})
}

func FuzzCommandSegmentsSplitLikeReplacing(f *testing.F) {
	for _, s := range textCases {
		f.Add(s)
	}
	r := strings.NewReplacer("&&", "\n", "||", "\n", ";", "\n")
	f.Fuzz(func(t *testing.T, s string) {
		got := slices.Collect(commandSegments(s))
		if want := strings.Split(r.Replace(s), "\n"); !slices.Equal(got, want) {
			t.Fatalf("commandSegments(%q) = %q, want %q", s, got, want)
		}
	})
}
