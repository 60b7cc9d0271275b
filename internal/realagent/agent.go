package realagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// Agent names an agent the harness can resume.
type Agent string

// The agents, as their session files' formats are named.
const (
	ClaudeCode Agent = "claude-code"
	Codex      Agent = "codex"
)

// Options says how to resume a session.
type Options struct {
	// Bin is the agent's executable: node_modules/.bin/claude or
	// node_modules/.bin/codex.
	Bin string
	// Session is the session file to resume; it is copied, never changed.
	Session string
	// Prompt is the user message sent after resuming.
	Prompt string
	// Reply is the text the fake upstream answers with.
	Reply string
	// Model is the model the agent is told to use; "" means the model the
	// session last used, as a user resuming it would have it (Codex
	// compacts before the turn when the model changed).
	Model string
	// Timeout bounds the agent's run; 0 means DefaultTimeout.
	Timeout time.Duration
	// Dir is where the agent's home, configuration and working directory
	// are made; it must exist and is left in place (a test passes
	// t.TempDir()).
	Dir string
	// BaseURL is where the agent sends its model calls, such as a
	// compact-host proxy in front of an upstream of the test's own; ""
	// means the fake upstream. Any other host still reaches only the
	// fake upstream, which records and refuses it.
	BaseURL string
	// Env holds variables set for the agent beyond the harness's own,
	// such as the agent's settings (CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=30).
	Env []string
	// Args are flags added to the agent's command line before the
	// prompt, such as Claude Code's --mcp-config FILE.
	Args []string
	// CodexConfig is TOML appended to Codex's config.toml, such as an
	// [mcp_servers.NAME] table.
	CodexConfig string
}

// DefaultTimeout bounds a run when Options.Timeout is 0: one turn against
// a loopback upstream takes seconds; the rest is room for a loaded machine.
const DefaultTimeout = 90 * time.Second

// maxOutputBytes bounds what is kept of the agent's stdout and stderr.
const maxOutputBytes = 1 << 20

// Run is what one resume did.
type Run struct {
	// Args is the command line, the binary first.
	Args []string
	// Env holds the variables set for the agent, beyond PATH.
	Env []string
	// Requests are the requests the agent sent to the fake upstream, or
	// tried to send anywhere else, in order.
	Requests []Request
	// Stdout and Stderr are the agent's output, cut at 1 MiB each.
	Stdout, Stderr []byte
	// SessionID is the ID of the resumed session.
	SessionID string
	// Home is the home directory the agent ran with.
	Home string
}

// ModelCalls returns the requests that called the model: POST /v1/messages
// for Claude Code, POST /v1/responses for Codex.
func (r *Run) ModelCalls() []Request {
	var out []Request
	for _, q := range r.Requests {
		if q.Method == "POST" && (q.Path == "/v1/messages" || q.Path == "/v1/responses") {
			out = append(out, q)
		}
	}
	return out
}

// Resume resumes opts.Session with the agent for one turn against a fake
// upstream on loopback and returns what the agent sent. The agent runs
// with a home of its own under opts.Dir, no credentials but a dummy key,
// and every proxy variable pointing at the fake upstream, which records
// and refuses any request for another host.
func Resume(ctx context.Context, agent Agent, opts Options) (*Run, error) {
	if opts.Bin == "" || opts.Session == "" || opts.Dir == "" {
		return nil, errors.New("realagent: Options.Bin, Session and Dir are required")
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Reply == "" {
		opts.Reply = "Resumed."
	}
	data, err := readSession(opts.Session)
	if err != nil {
		return nil, err
	}
	up, err := StartUpstream(opts.Reply)
	if err != nil {
		return nil, err
	}
	defer up.Close()

	dir, err := filepath.EvalSymlinks(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("realagent: Options.Dir: %w", err)
	}
	// The temporary directory is apart from the home: Codex refuses to
	// install its helper commands in a home under it.
	home, work, tmp := filepath.Join(dir, "home"), filepath.Join(dir, "work"), filepath.Join(dir, "tmp")
	for _, d := range []string{home, work, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	run := &Run{Home: home}
	base := opts.BaseURL
	if base == "" {
		base = up.URL()
	}
	switch agent {
	case ClaudeCode:
		err = prepareClaudeCode(run, data, base, work, opts)
	case Codex:
		err = prepareCodex(run, data, base, opts)
	default:
		err = fmt.Errorf("realagent: unknown agent %q (want %q or %q)", agent, ClaudeCode, Codex)
	}
	if err != nil {
		return nil, err
	}
	// Any request for another host goes to the fake upstream as a proxy,
	// which records and refuses it: nothing leaves the machine, and what
	// would have is seen.
	run.Env = append(run.Env, "HOME="+home, "TMPDIR="+tmp, "LANG=C.UTF-8", "NO_COLOR=1", "TERM=dumb",
		"HTTP_PROXY="+up.URL(), "HTTPS_PROXY="+up.URL(), "ALL_PROXY="+up.URL(),
		"http_proxy="+up.URL(), "https_proxy="+up.URL(), "all_proxy="+up.URL(),
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
	run.Env = append(run.Env, opts.Env...)

	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	run.Stdout, run.Stderr, err = runGroup(ctx, run.Args, run.Env, work)
	run.Requests = up.Requests()
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return run, fmt.Errorf("realagent: %s did not finish within %s: %w\nstderr: %s", agent, opts.Timeout, ctx.Err(), tail(run.Stderr))
	case ctx.Err() != nil:
		return run, fmt.Errorf("realagent: %s stopped: %w", agent, ctx.Err())
	}
	if err != nil {
		return run, fmt.Errorf("realagent: %s: %w\nstdout: %s\nstderr: %s", strings.Join(run.Args, " "), err, tail(run.Stdout), tail(run.Stderr))
	}
	if n := up.Dropped(); n > 0 {
		return run, fmt.Errorf("realagent: %s sent %d requests past the %d recorded", agent, n, up.requestLimit)
	}
	return run, nil
}

// runGroup runs args in dir with PATH and env, no input, until it exits
// or ctx ends, and returns its output, cut at maxOutputBytes each. The
// agent and whatever it starts are one process group, ended together
// when ctx ends, and anything left of it afterwards.
func runGroup(ctx context.Context, args, env []string, dir string) (stdout, stderr []byte, err error) {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.Stdin = strings.NewReader("")
	out, errOut := &capped{max: maxOutputBytes}, &capped{max: maxOutputBytes}
	cmd.Stdout, cmd.Stderr = out, errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // anything it left behind
	}
	return out.Bytes(), errOut.Bytes(), err
}

// maxSessionBytes bounds the session file read: the corpus's largest is
// under 3 MB.
const maxSessionBytes = 256 << 20

func readSession(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("realagent: the session file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSessionBytes+1))
	if err != nil {
		return nil, fmt.Errorf("realagent: reading %s: %w", path, err)
	}
	if len(data) > maxSessionBytes {
		return nil, fmt.Errorf("realagent: %s is over %d MiB", path, maxSessionBytes>>20)
	}
	return data, nil
}

// firstRecord returns the first JSONL record of data that match accepts.
func firstRecord(data []byte, match func(line []byte) bool) []byte {
	var found []byte
	eachRecord(data, func(line []byte) bool {
		if match(line) {
			found = line
			return false
		}
		return true
	})
	return found
}

// eachRecord calls fn with each line of data until fn returns false.
func eachRecord(data []byte, fn func(line []byte) bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for sc.Scan() && fn(sc.Bytes()) {
	}
}

// lastModel is the model field the last record that match accepts names.
func lastModel(data []byte, match func(line []byte) (model string)) string {
	model := ""
	eachRecord(data, func(line []byte) bool {
		if m := match(line); m != "" {
			model = m
		}
		return true
	})
	return model
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// maxSlugLen is the longest project name Claude Code keeps as it is.
const maxSlugLen = 200

// projectSlug is the directory name Claude Code keeps a working
// directory's sessions under: the absolute path with every UTF-16 code
// unit that is not an ASCII letter or digit replaced by '-' (a character
// outside the Basic Multilingual Plane is two).
func projectSlug(dir string) string {
	var b strings.Builder
	for _, r := range dir {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case r > 0xFFFF:
			b.WriteString("--")
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

// prepareClaudeCode places the session where Claude Code looks for the
// sessions of the working directory, <config>/projects/<slug>/<id>.jsonl,
// and sets the command: claude -p --resume <id> <prompt>.
func prepareClaudeCode(run *Run, data []byte, base, work string, opts Options) error {
	rec := firstRecord(data, func(line []byte) bool {
		var r struct {
			SessionID string `json:"sessionId"`
		}
		return json.Unmarshal(line, &r) == nil && r.SessionID != ""
	})
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if rec == nil || json.Unmarshal(rec, &r) != nil || !uuidPattern.MatchString(r.SessionID) {
		return fmt.Errorf("realagent: %s: no record with a sessionId UUID; is it a Claude Code session?", opts.Session)
	}
	slug := projectSlug(work)
	if len(slug) > maxSlugLen {
		return fmt.Errorf("realagent: Options.Dir %s is too deep: Claude Code shortens project names over %d characters in a way the harness does not copy; use a shorter directory", opts.Dir, maxSlugLen)
	}
	config := filepath.Join(run.Home, ".claude")
	proj := filepath.Join(config, "projects", slug)
	if err := os.MkdirAll(proj, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(proj, r.SessionID+".jsonl"), data, 0o600); err != nil {
		return err
	}
	model := opts.Model
	if model == "" {
		model = lastModel(data, func(line []byte) string {
			var a struct {
				Type    string `json:"type"`
				Message struct {
					Model string `json:"model"`
				} `json:"message"`
			}
			// Claude Code writes "<synthetic>" for messages it made itself.
			if json.Unmarshal(line, &a) != nil || a.Type != "assistant" || strings.HasPrefix(a.Message.Model, "<") {
				return ""
			}
			return a.Message.Model
		})
	}
	run.SessionID = r.SessionID
	run.Args = []string{opts.Bin, "-p", "--resume", r.SessionID}
	if model != "" {
		run.Args = append(run.Args, "--model", model)
	}
	run.Args = append(run.Args, opts.Args...)
	run.Args = append(run.Args, opts.Prompt)
	run.Env = []string{
		"CLAUDE_CONFIG_DIR=" + config,
		"ANTHROPIC_BASE_URL=" + base,
		"ANTHROPIC_API_KEY=sk-ant-realagent-dummy",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}
	return nil
}

// prepareCodex places the rollout where Codex keeps it,
// $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl, points the
// OpenAI provider at the fake upstream in config.toml and sets the
// command: codex exec resume <id> <prompt>.
func prepareCodex(run *Run, data []byte, base string, opts Options) error {
	type meta struct {
		Type    string `json:"type"`
		Payload struct {
			ID        string `json:"id"`
			Timestamp string `json:"timestamp"`
		} `json:"payload"`
	}
	rec := firstRecord(data, func(line []byte) bool {
		var m meta
		return json.Unmarshal(line, &m) == nil && m.Type == "session_meta"
	})
	var m meta
	if rec == nil || json.Unmarshal(rec, &m) != nil || !uuidPattern.MatchString(m.Payload.ID) {
		return fmt.Errorf("realagent: %s: no session_meta record with a UUID id; is it a Codex rollout?", opts.Session)
	}
	at, err := time.Parse(time.RFC3339Nano, m.Payload.Timestamp)
	if err != nil {
		return fmt.Errorf("realagent: %s: session_meta timestamp %q: %w", opts.Session, m.Payload.Timestamp, err)
	}
	at = at.UTC()
	codexHome := filepath.Join(run.Home, ".codex")
	day := filepath.Join(codexHome, "sessions", at.Format("2006"), at.Format("01"), at.Format("02"))
	if err := os.MkdirAll(day, 0o700); err != nil {
		return err
	}
	name := "rollout-" + at.Format("2006-01-02T15-04-05") + "-" + m.Payload.ID + ".jsonl"
	if err := os.WriteFile(filepath.Join(day, name), data, 0o600); err != nil {
		return err
	}
	// openai_base_url points the built-in OpenAI provider at the
	// upstream; analytics off spares one request that would only be
	// refused. Features stay at their defaults: they change
	// the tools and instructions the agent sends.
	config := "openai_base_url = " + tomlString(base+"/v1") + "\n\n[analytics]\nenabled = false\n"
	if opts.CodexConfig != "" {
		config += "\n" + opts.CodexConfig + "\n"
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600); err != nil {
		return err
	}
	model := opts.Model
	if model == "" {
		model = lastModel(data, func(line []byte) string {
			var tc struct {
				Type    string `json:"type"`
				Payload struct {
					Model string `json:"model"`
				} `json:"payload"`
			}
			if json.Unmarshal(line, &tc) != nil || tc.Type != "turn_context" {
				return ""
			}
			return tc.Payload.Model
		})
	}
	run.SessionID = m.Payload.ID
	// --skip-git-repo-check: the working directory is a fresh temporary
	// one, which Codex otherwise refuses to run in.
	run.Args = []string{opts.Bin, "exec", "--skip-git-repo-check", "resume"}
	if model != "" {
		run.Args = append(run.Args, "--model", model)
	}
	run.Args = append(run.Args, opts.Args...)
	run.Args = append(run.Args, m.Payload.ID, opts.Prompt)
	run.Env = []string{
		"CODEX_HOME=" + codexHome,
		"OPENAI_API_KEY=sk-realagent-dummy",
	}
	return nil
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	b, _ := json.Marshal(s) // a JSON string of printable text is a TOML basic string
	return string(b)
}

// capped keeps the first max bytes written to it and drops the rest.
type capped struct {
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *capped) Bytes() []byte { return c.buf.Bytes() }

// tail is the end of an agent's output, for an error message.
func tail(b []byte) string {
	const n = 4000
	if len(b) > n {
		return "..." + string(b[len(b)-n:])
	}
	return string(b)
}
