package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compact-host/compact-host/host"
)

// The loop reads the engine's own sources through a window far too small
// for them: it must compact along the way, finish, and leave a session log
// whose context is valid.
func TestAgentLoopCompactsAndFinishes(t *testing.T) {
	var out bytes.Buffer
	logPath := filepath.Join(t.TempDir(), "run.jsonl")
	if err := run(context.Background(), &out, "../../host/internal", 16000, logPath); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	text := out.String()
	if !strings.Contains(text, "done after") || !strings.Contains(text, "compaction c1") {
		t.Fatalf("no compaction or no end:\n%s", text)
	}
	if !strings.Contains(text, "compaction c1: structured,") {
		t.Fatalf("the first compaction did not run the structured built-in in process:\n%s", text)
	}
	e, err := host.New(host.Config{ContextWindow: 16000})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.LoadSession(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Validate(s.Context(), false); err != nil {
		t.Fatal(err)
	}
	if len(s.Compactions()) == 0 {
		t.Fatal("the log holds no compaction")
	}
}
