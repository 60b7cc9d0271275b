//go:build unix

// Command compare measures compact-host's session append, plan and load on
// the shared corpus (../shared/corpus and ../shared/corpus-new) and on a
// synthetic session of 10,000 messages, runs the same measurements on pi's
// engine (bench/pi/bench.mjs, npm @mariozechner/pi-coding-agent) and prints
// both with their ratios. make bench-pi installs pi and runs it:
//
//	go run ./bench/pi/compare [-corpus DIR,DIR] [-node node] [-keep 40000] [-min 1s]
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
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/internal/sessionio"
	"github.com/compact-host/compact-host/plugins/pluginstest"
)

type options struct {
	corpus, node, script string
	keep                 int
	synthetic            int
	min                  time.Duration
	wall                 bool
}

func main() {
	var o options
	fs := flag.NewFlagSet("compare", flag.ExitOnError)
	fs.StringVar(&o.corpus, "corpus", "", "comma-separated directories of agent sessions (default: ../shared/corpus and ../shared/corpus-new above the module root)")
	fs.StringVar(&o.node, "node", "node", "the Node.js binary that runs bench/pi/bench.mjs")
	fs.StringVar(&o.script, "script", "", "pi's side of the measurement (default: bench/pi/bench.mjs in the module)")
	fs.IntVar(&o.keep, "keep", 40000, "tokens kept verbatim by the cut (both engines)")
	fs.IntVar(&o.synthetic, "synthetic", 10000, "messages of the synthetic session also measured (0: none)")
	fs.DurationVar(&o.min, "min", time.Second, "least time spent on each measurement")
	fs.BoolVar(&o.wall, "wall", false, "report wall time instead of CPU time")
	_ = fs.Parse(os.Args[1:])
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// ours are compact-host's figures for one session, in nanoseconds.
type ours struct {
	messages         int
	compactions      int
	appendPerMessage float64
	plan             float64
	planMessages     int
	fileBytes        int
	fileNs           float64
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

// session is one conversation both engines read: an agent's file (nil
// for the synthetic session) and what its reader found in it.
type session struct {
	name string
	data []byte
	sess *formats.Session
}

func run(o options) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	dirs := []string{filepath.Join(root, "..", "shared", "corpus"), filepath.Join(root, "..", "shared", "corpus-new")}
	if o.corpus != "" {
		dirs = strings.Split(o.corpus, ",")
	}
	if o.script == "" {
		o.script = filepath.Join(root, "bench", "pi", "bench.mjs")
	}
	var sessions []session
	for _, dir := range dirs {
		files, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("%w (set -corpus to the directories of the agent sessions)", err)
		}
		for _, f := range files {
			if f.IsDir() {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, f.Name()))
			if err != nil {
				return err
			}
			sess, err := formats.Read(bytes.NewReader(data), "")
			if err != nil {
				fmt.Fprintf(os.Stderr, "compare: %s left out: %s\n", f.Name(), strings.SplitN(err.Error(), ";", 2)[0])
				continue
			}
			sessions = append(sessions, session{name: f.Name(), data: data, sess: sess})
		}
	}
	if o.synthetic > 0 {
		sessions = append(sessions, session{name: fmt.Sprintf("synthetic-%dk", o.synthetic/1000),
			sess: &formats.Session{Messages: pluginstest.LongSession(o.synthetic)}})
	}
	tmp, err := os.MkdirTemp("", "compact-host-bench-pi-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.MkdirAll(filepath.Join(tmp, "sessions"), 0o755); err != nil {
		return err
	}

	mine := map[string]ours{}
	for _, s := range sessions {
		res, err := measureOurs(o, s, tmp)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		mine[s.name] = res
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
	fmt.Fprintln(w, "session\tmsgs\tcompactions\tappend µs/msg\tpi\tratio\tplan@10k µs\tpi cut\tratio\tpi prepare\tfile read ms\tMB/s\tlog load ms\tpi load ms\tratio\t")
	lo, hi, met := math.Inf(1), 0.0, 0
	for _, s := range sessions {
		m, p := mine[s.name], pi.Results[s.name]
		pick := func(wall, cpu float64) float64 {
			if o.wall {
				return wall
			}
			return cpu
		}
		pAppend, pCut, pPrep, pLoad := pick(p.AppendNsPerMessage, p.AppendCPUPerMessage), pick(p.CutNs, p.CutCPU), pick(p.PrepareNs, p.PrepareCPU), pick(p.LoadNs, p.LoadCPU)
		file, rate := "-", "-"
		if m.fileBytes > 0 {
			file, rate = fmt.Sprintf("%.2f", m.fileNs/1e6), fmt.Sprintf("%.0f", float64(m.fileBytes)/(m.fileNs/1e9)/1e6)
		}
		load := ratio(m.logNs, pLoad)
		lo, hi = min(lo, load), max(hi, load)
		if load <= 0.5 {
			met++
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.1f\t%.1f\t%.3f\t%.1f\t%s\t%s\t%.2f\t%.2f\t%.2f\t\n", strings.TrimSuffix(s.name, ".jsonl"),
			m.messages, m.compactions,
			m.appendPerMessage/1e3, pAppend/1e3, ratio(m.appendPerMessage, pAppend),
			m.plan/1e3, pCut/1e3, ratio(m.plan, pCut), pPrep/1e3,
			file, rate, m.logNs/1e6, pLoad/1e6, load)
	}
	w.Flush()
	fmt.Printf("\nlog load ratio %.2f–%.2f; at most 0.5 on %d of %d sessions\n", lo, hi, met, len(sessions))
	fmt.Println("\nappend: every message of the session appended to a new in-memory session (compact-host: token estimate and file")
	fmt.Println("operations included; pi: appendMessage). plan@10k: Engine.Plan on the session repeated to 10,000 messages; pi cut:")
	fmt.Println("findCutPoint on the same, pi prepare: prepareCompaction. file read: the agent's file read as compact-host reads it")
	fmt.Println("(sessionio.Read: the live context, the recorded usage, the agent's overhead). log load: each engine's own session")
	fmt.Println("log of the conversation, the agent's compactions included as compaction entries, read back to the context it")
	fmt.Println("sends (compact-host LoadSession; pi SessionManager.open and buildSessionContext). Message counts differ: pi splits")
	fmt.Println("tool results into messages of their own.")
	return nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// measureOurs measures compact-host on one session and writes its log to
// tmp/sessions, where bench.mjs reads the same conversation for pi.
func measureOurs(o options, s session, tmp string) (ours, error) {
	msgs := s.sess.Messages
	res := ours{messages: len(msgs), compactions: len(s.sess.AgentCompactions), fileBytes: len(s.data)}
	var failed error
	note := func(err error) {
		if err != nil && failed == nil {
			failed = err
		}
	}
	e, err := host.New(host.Config{ContextWindow: 1 << 30, MaxOutputTokens: 32000, Tokenizer: "chars"})
	if err != nil {
		return res, err
	}

	if s.data != nil {
		res.fileNs = measure(o, func() { _, err := sessionio.Read(e, s.name, s.data, ""); note(err) })
	}
	res.appendPerMessage = measure(o, func() { note(e.NewSession().Append(msgs...)) }) / float64(len(msgs))

	big := e.NewSession()
	for round := 0; big.Len() < 10000; round++ {
		for _, m := range msgs {
			m.ID = fmt.Sprintf("r%d-%s", round, m.ID)
			m.Pinned = m.Pinned && round == 0
			if err := big.Append(m); err != nil {
				return res, err
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

	logPath := filepath.Join(tmp, "sessions", s.name+".jsonl")
	log, err := sessionLog(s.sess)
	if err != nil {
		return res, err
	}
	if err := os.WriteFile(logPath, log, 0o644); err != nil {
		return res, err
	}
	res.logBytes = len(log)
	if _, err := e.LoadSession(logPath); err != nil {
		return res, fmt.Errorf("its log does not load: %w", err)
	}
	res.logNs = measure(o, func() { _, err := e.LoadSession(logPath); note(err) })
	return res, failed
}

// sessionLog is the session log of the conversation as the engine writes
// it, one entry a line: its messages, and where the agent compacted, a
// compaction entry folding every message before it, whose summary is the
// agent's (with the text of the history it kept in place of the folded
// messages, as Codex keeps the user's messages). bench.mjs writes pi's
// log of the same conversation from it.
func sessionLog(sess *formats.Session) ([]byte, error) {
	var out bytes.Buffer
	write := func(e host.Entry) error {
		line, err := json.Marshal(e) // as the engine's log writer encodes
		if err != nil {
			return err
		}
		out.Write(line)
		out.WriteByte('\n')
		return nil
	}
	next := 0
	for k, c := range sess.AgentCompactions {
		for ; next < c.FirstKept; next++ {
			if err := write(host.Entry{Type: host.EntryMessage, Message: &sess.Messages[next]}); err != nil {
				return nil, err
			}
		}
		if next == 0 {
			continue
		}
		summary := []string{c.Summary}
		for i := range c.Replacement {
			if t := c.Replacement[i].Text(); t != "" && c.Replacement[i].Role != abi.RoleSystem {
				summary = append(summary, t)
			}
		}
		comp := host.Compaction{ID: fmt.Sprintf("agent-%d", k+1), FoldedThrough: sess.Messages[next-1].ID,
			Summary: strings.TrimSpace(strings.Join(summary, "\n\n")), Strategy: "agent", TokensBefore: c.PreTokens,
			MessagesFolded: next, Time: time.Unix(0, 0).UTC()}
		if err := write(host.Entry{Type: host.EntryCompaction, Compaction: &comp}); err != nil {
			return nil, err
		}
	}
	for ; next < len(sess.Messages); next++ {
		if err := write(host.Entry{Type: host.EntryMessage, Message: &sess.Messages[next]}); err != nil {
			return nil, err
		}
	}
	return out.Bytes(), nil
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
