//go:build unix

// Command compare measures compact-host's session append, plan and load on
// the shared corpus, runs the same measurements on pi's engine
// (bench/pi/bench.mjs, npm @mariozechner/pi-coding-agent) and prints both
// with their ratios. make bench-pi installs pi and runs it:
//
//	go run ./bench/pi/compare [-corpus DIR] [-node node] [-keep 40000] [-min 1s]
//
// Times are CPU time of the process per operation (user + system), which
// stays meaningful on a shared machine where wall time measures the queue;
// -wall prints wall time instead.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
)

type options struct {
	corpus, node, script string
	keep                 int
	min                  time.Duration
	wall                 bool
}

func main() {
	var o options
	flag.StringVar(&o.corpus, "corpus", "", "directory of the corpus sessions (default: ../shared/corpus above the module root)")
	flag.StringVar(&o.node, "node", "node", "the Node.js binary that runs bench/pi/bench.mjs")
	flag.StringVar(&o.script, "script", "", "pi's side of the measurement (default: bench/pi/bench.mjs in the module)")
	flag.IntVar(&o.keep, "keep", 40000, "tokens kept verbatim by the cut (both engines)")
	flag.DurationVar(&o.min, "min", time.Second, "least time spent on each measurement")
	flag.BoolVar(&o.wall, "wall", false, "report wall time instead of CPU time")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// ours are compact-host's figures for one session, in nanoseconds.
type ours struct {
	messages         int
	appendPerMessage float64
	plan             float64
	planMessages     int
	importBytes      int
	importNs         float64
	logBytes         int
	logNs            float64
}

// pis are pi's figures for one session, as bench.mjs prints them.
type pis struct {
	Messages            int     `json:"messages"`
	AppendNsPerMessage  float64 `json:"append_ns_per_message"`
	AppendCPUPerMessage float64 `json:"append_cpu_ns_per_message"`
	CutMessages         int     `json:"cut_messages"`
	CutNs               float64 `json:"cut_ns"`
	CutCPU              float64 `json:"cut_cpu_ns"`
	PrepareNs           float64 `json:"prepare_ns"`
	PrepareCPU          float64 `json:"prepare_cpu_ns"`
	LoadBytes           int     `json:"load_bytes"`
	LoadNs              float64 `json:"load_ns"`
	LoadCPU             float64 `json:"load_cpu_ns"`
}

func run(o options) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	if o.corpus == "" {
		o.corpus = filepath.Join(root, "..", "shared", "corpus")
	}
	if o.script == "" {
		o.script = filepath.Join(root, "bench", "pi", "bench.mjs")
	}
	files, err := os.ReadDir(o.corpus)
	if err != nil {
		return fmt.Errorf("%w (set -corpus to the directory of the corpus sessions)", err)
	}
	tmp, err := os.MkdirTemp("", "compact-host-bench-pi-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	mine := map[string]ours{}
	var names []string
	for _, f := range files {
		if f.IsDir() {
			continue
		}
		name := f.Name()
		res, msgs, err := measureOurs(o, filepath.Join(o.corpus, name), tmp)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		var buf bytes.Buffer
		if err := formats.Write(&buf, formats.Canonical, msgs); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, "sessions", name+".jsonl"), buf.Bytes(), 0o644); err != nil {
			return err
		}
		mine[name] = res
		names = append(names, name)
	}

	cmd := exec.Command(o.node, o.script, filepath.Join(tmp, "sessions"))
	cmd.Env = append(os.Environ(), fmt.Sprintf("KEEP_RECENT_TOKENS=%d", o.keep), fmt.Sprintf("MIN_SECONDS=%g", o.min.Seconds()))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s %s: %w (run make bench-pi, which installs pi with npm ci in bench/pi)", o.node, o.script, err)
	}
	var pi struct {
		Version string         `json:"pi_version"`
		Node    string         `json:"node"`
		Results map[string]pis `json:"results"`
	}
	if err := json.Unmarshal(out, &pi); err != nil {
		return fmt.Errorf("reading %s's output: %w", o.script, err)
	}
	clock := "CPU"
	if o.wall {
		clock = "wall"
	}
	fmt.Printf("compact-host vs pi %s (node %s), %s time; ratio = compact-host ÷ pi (below 1: compact-host is faster)\n\n", pi.Version, pi.Node, clock)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "session\tappend µs/msg\tpi\tratio\tplan@10k µs\tpi cut\tratio\tpi prepare\timport MB/s\tlog load ms\tpi load ms\tratio\t")
	for _, name := range names {
		m, p := mine[name], pi.Results[name]
		pick := func(wall, cpu float64) float64 {
			if o.wall {
				return wall
			}
			return cpu
		}
		pAppend, pCut, pPrep, pLoad := pick(p.AppendNsPerMessage, p.AppendCPUPerMessage), pick(p.CutNs, p.CutCPU), pick(p.PrepareNs, p.PrepareCPU), pick(p.LoadNs, p.LoadCPU)
		fmt.Fprintf(w, "%s\t%.2f\t%.2f\t%.2f\t%.1f\t%.1f\t%.3f\t%.1f\t%.0f\t%.2f\t%.2f\t%.2f\t\n", name,
			m.appendPerMessage/1e3, pAppend/1e3, ratio(m.appendPerMessage, pAppend),
			m.plan/1e3, pCut/1e3, ratio(m.plan, pCut), pPrep/1e3,
			float64(m.importBytes)/(m.importNs/1e9)/1e6, m.logNs/1e6, pLoad/1e6, ratio(m.logNs, pLoad))
	}
	w.Flush()
	fmt.Println("\nappend: every message of the session appended to a new in-memory session (compact-host: token estimate and file")
	fmt.Println("operations included; pi: appendMessage). plan@10k: Engine.Plan on the session repeated to 10,000 messages; pi cut:")
	fmt.Println("findCutPoint on the same, pi prepare: prepareCompaction. import: the corpus file read in its agent's format.")
	fmt.Println("log load: each engine's own session log of the conversation read back (compact-host LoadSession; pi")
	fmt.Println("SessionManager.open and buildSessionContext). Message counts differ: pi splits tool results into messages.")
	return nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// measureOurs measures compact-host on one corpus file.
func measureOurs(o options, path, tmp string) (ours, []abi.Message, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return ours{}, nil, err
	}
	sess, err := formats.Read(bytes.NewReader(data), "")
	if err != nil {
		return ours{}, nil, err
	}
	msgs := sess.Messages
	res := ours{messages: len(msgs), importBytes: len(data)}
	var failed error
	note := func(err error) {
		if err != nil && failed == nil {
			failed = err
		}
	}
	e, err := host.New(host.Config{ContextWindow: 1 << 30, MaxOutputTokens: 32000, Tokenizer: "chars"})
	if err != nil {
		return res, nil, err
	}

	res.importNs = measure(o, func() { _, err := formats.Read(bytes.NewReader(data), ""); note(err) })
	res.appendPerMessage = measure(o, func() { note(e.NewSession().Append(msgs...)) }) / float64(len(msgs))

	big := e.NewSession()
	for round := 0; big.Len() < 10000; round++ {
		for _, m := range msgs {
			m.ID = fmt.Sprintf("r%d-%s", round, m.ID)
			m.Pinned = m.Pinned && round == 0
			if err := big.Append(m); err != nil {
				return res, nil, err
			}
		}
	}
	res.planMessages = big.Len()
	res.plan = measure(o, func() {
		_, err := e.Plan(big, host.CompactOptions{KeepRecentTokens: o.keep})
		if !errors.Is(err, host.ErrNothingToFold) {
			note(err)
		}
	})

	if err := os.MkdirAll(filepath.Join(tmp, "sessions"), 0o755); err != nil {
		return res, nil, err
	}
	logPath := filepath.Join(tmp, filepath.Base(path)+".log.jsonl")
	s, err := e.OpenSession(logPath)
	if err != nil {
		return res, nil, err
	}
	if err := s.Append(msgs...); err != nil {
		return res, nil, err
	}
	if err := s.Close(); err != nil {
		return res, nil, err
	}
	if st, err := os.Stat(logPath); err == nil {
		res.logBytes = int(st.Size())
	}
	res.logNs = measure(o, func() { _, err := e.LoadSession(logPath); note(err) })
	return res, msgs, failed
}

// measure runs fn for at least o.min and returns nanoseconds per call, of
// CPU time or, with -wall, of wall time.
func measure(o options, fn func()) float64 {
	// Warm up as bench.mjs does for pi's JIT: caches, heap size.
	for w0 := time.Now(); time.Since(w0) < o.min*3/10; {
		fn()
	}
	cpu0, t0 := cpuTime(), time.Now()
	n := 0
	for n == 0 || time.Since(t0) < o.min {
		fn()
		n++
	}
	if o.wall {
		return float64(time.Since(t0).Nanoseconds()) / float64(n)
	}
	return float64((cpuTime() - cpu0).Nanoseconds()) / float64(n)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// moduleRoot is the directory of the go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory; run from the repository")
		}
		dir = parent
	}
}
