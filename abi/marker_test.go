package abi

import (
	"reflect"
	"strings"
	"testing"
)

func TestAppendMarkersAddsOnlyWhatIsMissing(t *testing.T) {
	ms := []Marker{
		{Ref: "s-00ff", Kind: MarkerSpan, Bytes: 12000},
		{Ref: "t-a1", Kind: MarkerToolOutput, ToolName: "Bash", Bytes: 2048},
		{Ref: "t-a1", Kind: MarkerToolOutput, ToolName: "Bash", Bytes: 2048},
	}
	got := AppendMarkers("## Active Task\nfix it [recall:s-00ff]\n", ms)
	want := "## Active Task\nfix it [recall:s-00ff]\n\n" + MarkerHeading + "\n- [recall:t-a1] output of Bash (2048 bytes)"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if again := AppendMarkers(got, ms); again != got {
		t.Fatalf("appending twice changed the summary:\n%q", again)
	}
	if s := AppendMarkers("plain", nil); s != "plain" {
		t.Fatalf("no markers changed the summary: %q", s)
	}
}

func TestMarkersInReadsOnlyWellFormedReferences(t *testing.T) {
	text := "a [recall:s-0a] b [recall:t-ff] [recall:s-0a] [recall:../../etc/passwd] [recall:t-XYZ] [recall:s-] [recall:t-" + strings.Repeat("a", 80) + "] [recall:t-1"
	got := MarkersIn(text)
	if want := []string{"s-0a", "t-ff"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("MarkersIn = %q, want %q", got, want)
	}
}

func TestValidRef(t *testing.T) {
	for ref, want := range map[string]bool{
		"s-0123abcd": true, "t-ff": true, "s-": false, "x-00": false, "t-0A": false,
		"t-../x": false, "s-00/..": false, "": false, "t-" + strings.Repeat("0", 62): true, "t-" + strings.Repeat("0", 63): false,
	} {
		if ValidRef(ref) != want {
			t.Errorf("ValidRef(%q) = %v, want %v", ref, !want, want)
		}
	}
}

// A request with markers decodes in a reader that knows nothing of them
// the way a plugin of ABI 1.0 reads it: the field is skipped.
func TestMarkersAreOptional(t *testing.T) {
	frame, err := Encode(&SummarizeRequest{Kind: FoldHistory, TargetTokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(frame), "markers") {
		t.Fatal("a request without markers names the field")
	}
	var got SummarizeRequest
	if err := Decode(frame, &got); err != nil || got.Markers != nil {
		t.Fatalf("Decode = %v, markers %v", err, got.Markers)
	}
}
