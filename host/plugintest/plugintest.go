// Package plugintest checks that a plugin keeps the compact-host plugin
// contract, whatever its transport: a conformance kit in the manner of
// testing/slogtest.
//
// Plugin authors call Run from their own tests:
//
//	func TestConformance(t *testing.T) {
//		p := plugin.InProcess(myplugin.New(), plugin.Options{})
//		plugintest.Run(t, p)
//	}
//
// and can run the same checks against their wasm build with
// plugin.OpenWasmFile, with Options.Wasm set to wasm.Runtime. `compact-host plugins verify PATH` calls Verify and
// prints the Report.
package plugintest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/plugin"
)

// Check is the outcome of one named check.
type Check struct {
	Name string
	// Passed is false for a failed check; Skipped checks do not apply to
	// the plugin (truncate checks for a strategy, say).
	Passed  bool
	Skipped bool
	// Detail says what failed, or why the check was skipped.
	Detail string
}

// Report is the outcome of Verify.
type Report struct {
	Plugin string
	Info   abi.Info
	Checks []Check
}

// OK reports whether no check failed.
func (r Report) OK() bool {
	for _, c := range r.Checks {
		if !c.Passed && !c.Skipped {
			return false
		}
	}
	return true
}

// Failed returns the failed checks.
func (r Report) Failed() []Check {
	var out []Check
	for _, c := range r.Checks {
		if !c.Passed && !c.Skipped {
			out = append(out, c)
		}
	}
	return out
}

// WriteText writes the report one check a line: "PASS name", "FAIL name:
// detail" or "SKIP name: reason", then a summary line. The plugin's text
// (its name, version, kinds, and the details, which quote its answers) is
// escaped with plugin.Escape.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	name := r.Info.Name
	if r.Info.Version != "" {
		name += " " + r.Info.Version
	}
	esc := plugin.Escape
	fmt.Fprintf(&b, "plugin %s (ABI v%d.%d, kinds %s)\n", esc(name), r.Info.ABIMajor, r.Info.ABIMinor, esc(strings.Join(r.Info.Kinds, ", ")))
	passed, failed, skipped := 0, 0, 0
	for _, c := range r.Checks {
		switch {
		case c.Skipped:
			skipped++
			fmt.Fprintf(&b, "SKIP %s: %s\n", esc(c.Name), esc(c.Detail))
		case c.Passed:
			passed++
			fmt.Fprintf(&b, "PASS %s\n", esc(c.Name))
		default:
			failed++
			fmt.Fprintf(&b, "FAIL %s: %s\n", esc(c.Name), esc(c.Detail))
		}
	}
	fmt.Fprintf(&b, "%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	_, err := io.WriteString(w, b.String())
	return err
}

// errSkip marks a check that does not apply.
type errSkip struct{ reason string }

func (e errSkip) Error() string { return e.reason }

func skip(format string, args ...any) error { return errSkip{fmt.Sprintf(format, args...)} }

// check is one named conformance check.
type check struct {
	name string
	run  func(ctx context.Context, p *plugin.Plugin) error
}

// checks lists the checks in the order they run. Truncate checks are
// expanded per declared category.
func checks(info abi.Info) []check {
	out := []check{
		{"info", checkInfo},
		{"kinds", checkKinds},
		{"summarize/history", summarizeCheck(abi.FoldHistory)},
		{"summarize/turn_prefix", summarizeCheck(abi.FoldTurnPrefix)},
	}
	if !info.Has(abi.KindTruncator) || len(info.Categories) == 0 {
		out = append(out, check{"truncate", func(context.Context, *plugin.Plugin) error { return skip("not a truncator") }})
	}
	if info.Has(abi.KindTruncator) {
		for _, cat := range info.Categories {
			out = append(out, check{"truncate/" + cat, truncateCheck(cat)})
		}
	}
	return append(out,
		check{"truncate/unknown_category", checkUnknownCategory},
		check{"garbage_request", checkGarbage},
		check{"deadline", checkDeadline},
		check{"concurrent", checkConcurrent},
	)
}

// Verify runs every check against p and reports each. It never fails
// itself: a plugin that crashes or hangs fails the checks it breaks.
func Verify(ctx context.Context, p *plugin.Plugin) Report {
	r := Report{Plugin: p.Name(), Info: p.Info()}
	for _, c := range checks(p.Info()) {
		r.Checks = append(r.Checks, runCheck(ctx, p, c))
	}
	return r
}

// Run runs every check against p as a subtest of t.
func Run(t *testing.T, p *plugin.Plugin) {
	t.Helper()
	for _, c := range checks(p.Info()) {
		t.Run(c.name, func(t *testing.T) {
			res := runCheck(t.Context(), p, c)
			switch {
			case res.Skipped:
				t.Skip(res.Detail)
			case !res.Passed:
				t.Error(res.Detail)
			}
		})
	}
}

// checkTimeout bounds one check so a hanging plugin fails it instead of
// hanging the verification.
const checkTimeout = 30 * time.Second

func runCheck(ctx context.Context, p *plugin.Plugin, c check) Check {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	err := c.run(ctx, p)
	var s errSkip
	switch {
	case err == nil:
		return Check{Name: c.name, Passed: true}
	case errors.As(err, &s):
		return Check{Name: c.name, Skipped: true, Detail: s.reason}
	default:
		return Check{Name: c.name, Detail: err.Error()}
	}
}

func checkInfo(_ context.Context, p *plugin.Plugin) error {
	info := p.Info()
	var problems []string
	if info.ABIMajor != abi.Major {
		problems = append(problems, fmt.Sprintf("abi_major is %d, want %d", info.ABIMajor, abi.Major))
	}
	if info.Name == "" {
		problems = append(problems, "name is empty")
	}
	if len(info.Kinds) == 0 {
		problems = append(problems, "kinds is empty")
	}
	for _, k := range info.Kinds {
		if k != abi.KindStrategy && k != abi.KindTruncator {
			problems = append(problems, fmt.Sprintf("unknown kind %q", k))
		}
	}
	if info.Has(abi.KindTruncator) && len(info.Categories) == 0 {
		problems = append(problems, "a truncator declares no categories")
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// checkKinds calls each operation: the declared ones must not answer
// unsupported, the others must.
func checkKinds(ctx context.Context, p *plugin.Plugin) error {
	info := p.Info()
	_, err := p.Summarize(ctx, nil, smallSession(abi.FoldHistory))
	if err := kindAnswer(abi.KindStrategy, info.Has(abi.KindStrategy), err); err != nil {
		return err
	}
	category := "generic"
	if len(info.Categories) > 0 {
		category = info.Categories[0]
	}
	_, err = p.Truncate(ctx, nil, &abi.TruncateRequest{Category: category, Content: []byte("short output\n"), MaxTokens: 100})
	return kindAnswer(abi.KindTruncator, info.Has(abi.KindTruncator), err)
}

func kindAnswer(kind string, declared bool, err error) error {
	unsupported := isCode(err, abi.CodeUnsupported)
	switch {
	case declared && unsupported:
		return fmt.Errorf("declares %s but answers unsupported: %v", kind, err)
	case declared && err != nil:
		return fmt.Errorf("declares %s but fails: %v", kind, err)
	case !declared && !unsupported:
		return fmt.Errorf("does not declare %s, want an unsupported error, got %v", kind, err)
	}
	return nil
}

func isCode(err error, code string) bool {
	var abiErr *abi.Error
	return errors.As(err, &abiErr) && abiErr.Code == code
}

func smallSession(kind string) *abi.SummarizeRequest {
	return &abi.SummarizeRequest{
		Kind: kind,
		Messages: []abi.Message{
			{ID: "m1", Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockText, Text: "Add a --dry-run flag to the deploy command."}}},
			{ID: "m2", Role: abi.RoleAssistant, Content: []abi.Block{
				{Type: abi.BlockText, Text: "Reading the command first."},
				{Type: abi.BlockToolUse, ID: "t1", Name: "read_file", Input: []byte(`{"path":"cmd/deploy.go"}`)},
			}},
			{ID: "m3", Role: abi.RoleUser, Content: []abi.Block{{Type: abi.BlockToolResult, ToolUseID: "t1", Text: "package cmd\n\nfunc deploy() error { return nil }\n"}}},
			{ID: "m4", Role: abi.RoleAssistant, Content: []abi.Block{{Type: abi.BlockText, Text: "Added the flag in cmd/deploy.go; tests pass."}}},
		},
		PreviousSummary: "The user maintains a CLI called shipit.",
		FileOps:         abi.FileOps{Read: []string{"cmd/deploy.go"}, Modified: []string{"cmd/deploy.go"}},
		TargetTokens:    300,
	}
}

func summarizeCheck(kind string) func(context.Context, *plugin.Plugin) error {
	return func(ctx context.Context, p *plugin.Plugin) error {
		if !p.Info().Has(abi.KindStrategy) {
			return skip("not a strategy")
		}
		resp, err := p.Summarize(ctx, plugin.OfflineServices{}, smallSession(kind))
		if err != nil {
			return fmt.Errorf("offline summarize: %w", err)
		}
		if strings.TrimSpace(resp.Summary) == "" {
			return errors.New("summary is empty")
		}
		if !resp.Offline {
			return errors.New("with no model the summary must say offline=true")
		}
		if !utf8.ValidString(resp.Summary) {
			return errors.New("summary is not valid UTF-8")
		}
		return nil
	}
}

// bigOutput is a tool output of many lines mixing ASCII and multi-byte
// UTF-8, so a cut in the wrong place shows.
func bigOutput() []byte {
	var b strings.Builder
	for i := range 4000 {
		fmt.Fprintf(&b, "line %05d: résumé naïve 日本語テキスト ✓ %s\n", i, strings.Repeat("x", i%40))
	}
	return []byte(b.String())
}

func truncateCheck(category string) func(context.Context, *plugin.Plugin) error {
	return func(ctx context.Context, p *plugin.Plugin) error {
		svc := plugin.OfflineServices{}
		for _, maxTokens := range []int{200, 2000} {
			resp, err := p.Truncate(ctx, svc, &abi.TruncateRequest{Category: category, ToolName: "bash", Content: bigOutput(), MaxTokens: maxTokens})
			if err != nil {
				return fmt.Errorf("max_tokens %d: %w", maxTokens, err)
			}
			n, _ := svc.CountTokens(ctx, string(resp.Content))
			if n > maxTokens {
				return fmt.Errorf("max_tokens %d: output is %d tokens", maxTokens, n)
			}
			if !utf8.Valid(resp.Content) {
				return fmt.Errorf("max_tokens %d: output is not valid UTF-8 (a multi-byte character was cut)", maxTokens)
			}
			if !resp.Truncated {
				return fmt.Errorf("max_tokens %d: output was cut but truncated=false", maxTokens)
			}
		}
		return nil
	}
}

func checkUnknownCategory(ctx context.Context, p *plugin.Plugin) error {
	if !p.Info().Has(abi.KindTruncator) {
		return skip("not a truncator")
	}
	_, err := p.Truncate(ctx, nil, &abi.TruncateRequest{Category: "no-such-category-x9", Content: []byte("x"), MaxTokens: 10})
	if !isCode(err, abi.CodeUnsupported) {
		return fmt.Errorf("want an unsupported error, got %v", err)
	}
	return nil
}

// checkGarbage sends requests that are not frames, or frames of the wrong
// document: each must get an error frame, and the plugin must keep working.
func checkGarbage(ctx context.Context, p *plugin.Plugin) error {
	garbage := [][]byte{nil, []byte("not a frame"), []byte("CHF\x01\xff\xff\xff\x7f"), []byte("CHF\x02\x00\x00\x00\x00\x00\x00\x00\x00")}
	for _, export := range []string{abi.ExportSummarize, abi.ExportTruncate} {
		kind := map[string]string{abi.ExportSummarize: abi.KindStrategy, abi.ExportTruncate: abi.KindTruncator}[export]
		if !p.Info().Has(kind) {
			continue
		}
		for _, g := range garbage {
			out, err := p.CallFrame(ctx, nil, export, g)
			if err != nil {
				return fmt.Errorf("%s with %q: %w", export, trim(g), err)
			}
			var abiErr *abi.Error
			if err := abi.Decode(out, &abi.TruncateResponse{}); !errors.As(err, &abiErr) {
				return fmt.Errorf("%s with %q: want an error frame, got %v", export, trim(g), err)
			}
		}
	}
	return checkInfo(ctx, p)
}

func trim(b []byte) string {
	if len(b) > 16 {
		return string(b[:16]) + "…"
	}
	return string(b)
}

// stalledModel never answers until the call's context ends.
type stalledModel struct{ plugin.OfflineServices }

func (stalledModel) Complete(ctx context.Context, _ *abi.CompleteRequest) (*abi.CompleteResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// checkDeadline gives the plugin a model that never answers and a short
// deadline: the call must come back (with an error, or an offline result),
// and the plugin must answer the next call.
func checkDeadline(ctx context.Context, p *plugin.Plugin) error {
	if !p.Info().Has(abi.KindStrategy) {
		return skip("not a strategy")
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	req := smallSession(abi.FoldHistory)
	req.ModelAvailable = true
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = p.Summarize(short, stalledModel{}, req)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return errors.New("the call did not return after its deadline")
	}
	if _, err := p.Summarize(ctx, nil, smallSession(abi.FoldHistory)); err != nil {
		return fmt.Errorf("call after the deadline: %w", err)
	}
	return nil
}

// checkConcurrent runs calls in parallel; each must get the answer a call
// on its own gets.
func checkConcurrent(ctx context.Context, p *plugin.Plugin) error {
	info := p.Info()
	type call func() (string, error)
	var calls []call
	if info.Has(abi.KindStrategy) {
		calls = append(calls, func() (string, error) {
			r, err := p.Summarize(ctx, nil, smallSession(abi.FoldHistory))
			if err != nil {
				return "", err
			}
			return r.Summary, nil
		})
	}
	if info.Has(abi.KindTruncator) && len(info.Categories) > 0 {
		calls = append(calls, func() (string, error) {
			r, err := p.Truncate(ctx, nil, &abi.TruncateRequest{Category: info.Categories[0], Content: bigOutput(), MaxTokens: 500})
			if err != nil {
				return "", err
			}
			return string(r.Content), nil
		})
	}
	for _, c := range calls {
		want, err := c()
		if err != nil {
			return err
		}
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				got, err := c()
				switch {
				case err != nil:
					errs[i] = err
				case got != want:
					errs[i] = errors.New("a concurrent call answered differently from a lone one")
				}
			})
		}
		wg.Wait()
		if err := errors.Join(slices.DeleteFunc(errs, func(e error) bool { return e == nil })...); err != nil {
			return err
		}
	}
	return nil
}
