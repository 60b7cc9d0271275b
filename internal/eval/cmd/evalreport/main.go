// Command evalreport runs the evaluation of package eval and prints its
// table: the same run as `compact-host eval`, with the same flags, for
// reproducing the figures in RATIONALE.md from a checkout.
//
//	go run ./internal/eval/cmd/evalreport -json eval.json -charts charts/
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/compact-host/compact-host/internal/eval"
)

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var sessions, windows, strategies list
	flag.Var(&sessions, "session", "session file (repeatable; default: the shared corpus)")
	flag.Var(&windows, "window", "context window in tokens (repeatable; default 200000, 128000, 32000)")
	flag.Var(&strategies, "strategy", "strategy (repeatable; default structured, narrative, truncate)")
	jsonPath := flag.String("json", "", "also write the report as JSON to this file")
	charts := flag.String("charts", "", "write one SVG chart per session into this directory")
	inProcess := flag.Bool("inprocess", false, "run the built-in strategies in process instead of as wasm")
	truncate := flag.Bool("truncate-outputs", false, "cap tool results with the engine's truncators before appending them")
	flag.Parse()

	opts := eval.Options{Sessions: sessions, Strategies: strategies, InProcess: *inProcess, TruncateToolOutputs: *truncate, Progress: os.Stderr}
	for _, w := range windows {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.ToLower(w), "k"))
		if err != nil {
			fail(fmt.Errorf("window %q: %w", w, err))
		}
		if strings.HasSuffix(strings.ToLower(w), "k") {
			n *= 1000
		}
		opts.Windows = append(opts.Windows, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := eval.Run(ctx, opts)
	if err != nil {
		fail(err)
	}
	if err := rep.WriteTable(os.Stdout); err != nil {
		fail(err)
	}
	if *jsonPath != "" {
		f, err := os.Create(*jsonPath)
		if err != nil {
			fail(err)
		}
		if err := rep.WriteJSON(f); err != nil {
			fail(err)
		}
		if err := f.Close(); err != nil {
			fail(err)
		}
	}
	if *charts != "" {
		files, err := rep.WriteCharts(*charts)
		if err != nil {
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "wrote %d charts to %s\n", len(files), *charts)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "evalreport:", err)
	os.Exit(1)
}
