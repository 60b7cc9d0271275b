package cli

import (
	"github.com/compact-host/compact-host/internal/tokencount"
	"testing"

	"github.com/compact-host/compact-host/host"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseConfig(t *testing.T) {
	good := `model = "gpt-4o"
strategy = "narrative"
fallbacks = ["truncate"]
max_input_bytes = 1048576
[thresholds]
prune = 0.6
min_savings = 0.2
[provider]
kind = "openai"
base_url = "http://localhost:11434/v1"
timeout = "90s"
max_retries = 0
[tools]
categories = { my_search = "match-list" }
[serve]
body_timeout = "10s"
`
	c, err := ParseConfig("c.toml", []byte(good))
	require.NoError(t, err)
	assert.Equal(t, "gpt-4o", c.Model)
	assert.Equal(t, 0.6, c.Thresholds.Prune)
	assert.Equal(t, 0.2, c.engineConfig().MinSavings)
	assert.Equal(t, 90.0, c.Provider.Timeout.Seconds())
	require.NotNil(t, c.Provider.MaxRetries)
	assert.Equal(t, 0, *c.Provider.MaxRetries, "0 means no retries, not the default")
	assert.Equal(t, int64(1<<20), c.MaxInputBytes)
	assert.Equal(t, 10.0, c.Serve.BodyTimeout.Seconds())
	assert.Equal(t, "match-list", c.Tools.Categories["my_search"])

	for name, tc := range map[string]struct{ text, want string }{
		"unknown key":       {"model = \"x\"\nmodle = \"y\"\n", `c.toml:2: unknown key "modle"`},
		"unknown section":   {"[provder]\nkind = \"openai\"\n", `unknown key "provder"`},
		"wrong type":        {"context_window = \"big\"\n", "c.toml:1"},
		"bad duration":      {"[provider]\ntimeout = \"soon\"\n", "not a duration"},
		"bad kind":          {"[provider]\nkind = \"gemini\"\n", "want anthropic, openai or none"},
		"bad share":         {"[thresholds]\ncompact = 85\n", "thresholds.compact 85: want a share between 0 and 1"},
		"NaN share":         {"[thresholds]\nprune = nan\n", "thresholds.prune NaN: want a share between 0 and 1"},
		"reserve over 1":    {"[thresholds]\noverhead_reserve = 1.5\n", "thresholds.overhead_reserve 1.5"},
		"savings over 1":    {"[thresholds]\nmin_savings = 1.5\n", "thresholds.min_savings 1.5: want a share between 0 and 1"},
		"huge window":       {"context_window = 9223372036854775807\n", "context_window 9223372036854775807"},
		"bad tokenizer":     {"tokenizer = \"foo\"\n", `tokenizer "foo": want auto, chars, o200k or cl100k`},
		"negative keep":     {"keep_recent_tokens = -1\n", "keep_recent_tokens -1"},
		"negative retries":  {"[provider]\nmax_retries = -1\n", "provider.max_retries -1"},
		"negative timeout":  {"[provider]\ntimeout = \"-5s\"\n", "provider.timeout -5s"},
		"negative bytes":    {"max_input_bytes = -1\n", "max_input_bytes -1"},
		"negative request":  {"[serve]\nmax_request_bytes = -1\n", "serve.max_request_bytes -1"},
		"negative body":     {"[serve]\nbody_timeout = \"-1s\"\n", "serve.body_timeout -1s"},
		"negative tool cap": {"[tools]\noutput_tokens = -1\n", "tools.output_tokens -1"},
		"bad toml":          {"model = \n", "c.toml:1"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig("c.toml", []byte(tc.text))
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotRegexp(t, `\b(Thresholds|ContextWindow|KeepRecentTokens|MaxRetries|Config\.)`, err.Error(), "a Go name leaked")
		})
	}
}

func TestEnvOverridesFileAndFlagsOverrideEnv(t *testing.T) {
	c, err := ParseConfig("c.toml", []byte("model = \"from-file\"\ncontext_window = 1000\n"))
	require.NoError(t, err)
	env := map[string]string{"COMPACT_HOST_MODEL": "from-env", "COMPACT_HOST_CONTEXT_WINDOW": "5000"}
	require.NoError(t, c.applyEnv(func(k string) string { return env[k] }))
	assert.Equal(t, "from-env", c.Model, "env overrides the file")
	assert.Equal(t, tokencount.Tokens(5000), c.ContextWindow)

	a := &app{cfg: c, flags: engineFlags{contextWindow: 9000}}
	hc := a.hostConfig()
	assert.Equal(t, "from-env", hc.Model)
	assert.Equal(t, 9000, hc.ContextWindow, "flags override the env")

	env["COMPACT_HOST_CONTEXT_WINDOW"] = "lots"
	assert.ErrorContains(t, c.applyEnv(func(k string) string { return env[k] }), "COMPACT_HOST_CONTEXT_WINDOW")
}

// An engine error names the flag when a flag set the value, the key when
// the config did, both when it is a default; and the exit code follows.
func TestSettingErrorsNameFlagsAndKeys(t *testing.T) {
	c, err := ParseConfig("c.toml", []byte("keep_recent_tokens = 999999\n"))
	require.NoError(t, err)
	a := &app{cfg: c, flags: engineFlags{contextWindow: 16000}}
	_, err = newEngineFor(a)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "keep_recent_tokens 999999: must be below the input budget")

	a = &app{flags: engineFlags{contextWindow: 16000, keepRecent: 999999}}
	_, err = newEngineFor(a)
	assert.True(t, isUsageError(err))
	assert.EqualError(t, err, "--keep-recent 999999: must be below the input budget of 12000 tokens")

	a = &app{flags: engineFlags{model: "no-such-model"}}
	_, err = newEngineFor(a)
	assert.EqualError(t, err, `--model "no-such-model": is not in the catalog; set --context-window (config context_window)`)
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("model = \"gpt-4o\"\n[thresholds]\nprune = 0.5\n"))
	f.Add([]byte("[provider]\ntimeout = \"2m\"\n[tools]\ncategories = { a = \"b\" }\n"))
	f.Add([]byte("fallbacks = [\"a\", 1]\n"))
	f.Add([]byte("[thresholds]\ncompact = nan\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := ParseConfig("f.toml", data)
		if err != nil {
			var ce *ConfigError
			require.ErrorAs(t, err, &ce, "untyped error %T", err)
			assert.Contains(t, err.Error(), "f.toml", "the error names the file")
		}
	})
}

// newEngineFor builds a's host.Config into an engine, naming errors as the
// commands do.
func newEngineFor(a *app) (any, error) {
	if err := a.hostConfig().Validate(); err != nil {
		return nil, a.settingError(err)
	}
	e, err := host.New(a.hostConfig())
	if err != nil {
		return nil, a.settingError(err)
	}
	return e, nil
}
