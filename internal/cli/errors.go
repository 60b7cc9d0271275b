package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/host/formats"
	"github.com/compact-host/compact-host/host/plugin"
	"github.com/compact-host/compact-host/host/provider"
	"github.com/compact-host/compact-host/internal/eval"
	"github.com/compact-host/compact-host/internal/sessionio"
)

// exitCode is the one place an error becomes an exit code: an explicit
// code wins, then the kind of error.
func exitCode(ctx context.Context, err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return ExitOK
	case ctx.Err() != nil:
		return ExitInterrupted
	case errors.As(err, &ee):
		return ee.code
	case isUsageError(err):
		return ExitUsage
	case errors.Is(err, host.ErrConcurrentCompaction) || errors.Is(err, host.ErrLogBusy) || errors.Is(err, host.ErrLogChanged):
		return ExitBusy
	case isInputError(err):
		return ExitInput
	case isPluginError(err):
		return ExitPlugin
	case isProviderError(err):
		return ExitProvider
	}
	return ExitError
}

// isInputError reports errors of the input files and the config: missing,
// unreadable, oversized, malformed, of an unknown format.
func isInputError(err error) bool {
	var (
		ce  *ConfigError
		ie  *inputError
		pe  *formats.ParseError
		inv *sessionio.InvalidError
		se  *eval.SessionError
		fe  *fs.PathError
	)
	return errors.As(err, &ce) || errors.As(err, &ie) || errors.As(err, &pe) || errors.As(err, &inv) ||
		errors.As(err, &se) || errors.As(err, &fe) ||
		errors.Is(err, formats.ErrUnknownFormat) || errors.Is(err, host.ErrBadEntry)
}

func isPluginError(err error) bool {
	for _, target := range []error{plugin.ErrVersionMismatch, plugin.ErrInvalidPlugin, plugin.ErrTrap, plugin.ErrDeadlineExceeded,
		plugin.ErrMemoryLimit, plugin.ErrOutputTooLarge, plugin.ErrMalformedOutput, plugin.ErrCrash, plugin.ErrHandshake,
		plugin.ErrPluginError, plugin.ErrNotFound} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

func isProviderError(err error) bool {
	var pe *provider.Error
	return errors.As(err, &pe) || errors.Is(err, provider.ErrTimeout) || errors.Is(err, provider.ErrEmptyCompletion)
}

// inputError is an input the command refuses before parsing it: too
// large, not a file, or a read that failed.
type inputError struct {
	Path string
	Msg  string
	Err  error
}

func (e *inputError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", displayPath(e.Path), e.Msg, e.Err)
	}
	return fmt.Sprintf("%s: %s", displayPath(e.Path), e.Msg)
}

func (e *inputError) Unwrap() error { return e.Err }

// setting names one engine or provider setting as a user writes it: the
// flag (empty when there is none) and the config key. Config fields of
// host.Config are named by their Go name, those of provider.Config with a
// "provider." prefix.
type setting struct{ flag, key string }

// settings is the one table from Go field names to flags and config keys.
var settings = map[string]setting{
	"Model":                    {"--model", "model"},
	"ContextWindow":            {"--context-window", "context_window"},
	"MaxOutputTokens":          {"--max-output-tokens", "max_output_tokens"},
	"Tokenizer":                {"--tokenizer", "tokenizer"},
	"Strategy":                 {"--strategy", "strategy"},
	"Fallbacks":                {"", "fallbacks"},
	"KeepRecentTokens":         {"--keep-recent", "keep_recent_tokens"},
	"SummaryTokens":            {"--summary-tokens", "summary_tokens"},
	"PruneThreshold":           {"", "thresholds.prune"},
	"CompactThreshold":         {"", "thresholds.compact"},
	"OverheadReserve":          {"", "thresholds.overhead_reserve"},
	"EmergencyThreshold":       {"", "thresholds.emergency"},
	"MinSavings":               {"", "thresholds.min_savings"},
	"ToolOutputTokens":         {"", "tools.output_tokens"},
	"provider.Kind":            {"--provider", "provider.kind"},
	"provider.BaseURL":         {"--base-url", "provider.base_url"},
	"provider.Model":           {"--compaction-model", "provider.model"},
	"provider.CompactionModel": {"--compaction-model", "provider.compaction_model"},
	"provider.Timeout":         {"--provider-timeout", "provider.timeout"},
	"provider.MaxRetries":      {"", "provider.max_retries"},
	"provider.APIKey":          {"", "provider.api_key_env"},
	"MaxInputBytes":            {"--max-input-bytes", "max_input_bytes"},
}

// origin says where a setting's value came from, so an error names what
// the user wrote.
type origin int

const (
	fromDefault origin = iota
	fromFlag
	fromConfig
)

// settingName is how a message names field: the flag when the value
// came from it, the config key when it came from the file, both when it
// is a default the user may change.
func settingName(field string, from origin) string {
	s, ok := settings[field]
	if !ok || s.flag == "" && s.key == "" {
		return field
	}
	switch {
	case from == fromFlag && s.flag != "":
		return s.flag
	case from == fromConfig && s.key != "", s.flag == "":
		return s.key
	case s.key == "":
		return s.flag
	}
	return s.flag + " (config " + s.key + ")"
}

// settingError turns a host or provider config error into one that names
// flags and config keys, with the exit code of where the bad value came
// from: 2 for a flag, 3 for the config file. of says where each field's
// value came from; prefix is "" for host.Config, "provider." for
// provider.Config; src places an error of the config file.
func settingError(err error, prefix string, of func(field string) origin, src configSource) error {
	var he *host.ConfigError
	var pe *provider.ConfigError
	var field, msg string
	switch {
	case errors.As(err, &he):
		field = he.Field
		msg = he.Format(func(f string) string { return settingName(prefix+f, of(prefix+f)) })
	case errors.As(err, &pe):
		field = prefix + pe.Field
		msg = settingName(field, of(field))
		if pe.Value != "" {
			msg += " " + pe.Value
		}
		msg += ": " + pe.Reason
	default:
		return err
	}
	if of(field) == fromConfig {
		return src.errorAt(settings[field].key, msg)
	}
	return usageError{errors.New(msg)}
}
