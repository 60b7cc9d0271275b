package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/compact-host/compact-host/host"
	"github.com/compact-host/compact-host/internal/suggest"
	"github.com/compact-host/compact-host/internal/tokencount"
	"github.com/pelletier/go-toml/v2"
)

// Config is the CLI's configuration. Precedence, highest first: flags,
// environment variables (COMPACT_HOST_*), the config file, defaults.
// The file is TOML; an unknown key is an error naming it.
type Config struct {
	Model           string            `toml:"model"`
	ContextWindow   tokencount.Tokens `toml:"context_window"`
	MaxOutputTokens tokencount.Tokens `toml:"max_output_tokens"`
	Tokenizer       string            `toml:"tokenizer"`
	Strategy        string            `toml:"strategy"`
	Fallbacks       []string          `toml:"fallbacks"`
	KeepRecent      tokencount.Tokens `toml:"keep_recent_tokens"`
	SummaryTokens   tokencount.Tokens `toml:"summary_tokens"`
	PluginsDir      string            `toml:"plugins_dir"`
	CacheDir        string            `toml:"cache_dir"`
	LogLevel        string            `toml:"log_level"`
	// MaxInputBytes bounds what a command reads from a file or stdin.
	MaxInputBytes int64 `toml:"max_input_bytes"`
	// Store is where the proxy keeps its compactions and serve its
	// sessions (storeopen.Usage).
	Store string `toml:"store"`

	Thresholds Thresholds     `toml:"thresholds"`
	Provider   ProviderConfig `toml:"provider"`
	Tools      ToolsConfig    `toml:"tools"`
	Serve      ServeConfig    `toml:"serve"`

	// src is where the values came from, for errors.
	src configSource
}

// configSource is where a config's values came from: the file, and the
// environment variables that override its keys. An error names the
// variable, or the file and the key's line.
type configSource struct {
	path string
	data []byte
	env  map[string]string // config key → the variable that set it
}

// errorAt is msg as an error of key, placed where the key was set.
func (s configSource) errorAt(key, msg string) *ConfigError {
	if v, ok := s.env[key]; ok {
		return &ConfigError{Path: v, Msg: msg}
	}
	path := s.path
	if path == "" {
		path = "config"
	}
	return &ConfigError{Path: path, Line: keyLine(s.data, key), Msg: msg}
}

// tomlKeyLine matches a line that sets a key: name = ..., with the name
// bare, dotted or quoted.
var tomlKeyLine = regexp.MustCompile(`^\s*([A-Za-z0-9_.\-"' ]+?)\s*=`)

// keyLine is the 1-based line of data that sets key ("thresholds.compact"),
// or 0 when none does (a key in an inline table, or a default).
func keyLine(data []byte, key string) int {
	table := ""
	for i, line := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "[") {
			name, _, _ := strings.Cut(strings.Trim(t, "[]"), "]")
			table = strings.Trim(strings.TrimSpace(name), `"'`) + "."
			continue
		}
		m := tomlKeyLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name := strings.NewReplacer(`"`, "", "'", "", " ", "").Replace(m[1])
		if table+name == key || table == "" && name == key {
			return i + 1
		}
	}
	return 0
}

// Thresholds are shares of the input budget.
type Thresholds struct {
	Prune           float64 `toml:"prune"`
	Compact         float64 `toml:"compact"`
	OverheadReserve float64 `toml:"overhead_reserve"`
	Emergency       float64 `toml:"emergency"`
	MinSavings      float64 `toml:"min_savings"`
	Disable         bool    `toml:"disable"`
}

// ProviderConfig selects the model that writes summaries.
type ProviderConfig struct {
	Kind            string   `toml:"kind"` // "anthropic", "openai" or "none"
	BaseURL         string   `toml:"base_url"`
	Model           string   `toml:"model"`
	CompactionModel string   `toml:"compaction_model"`
	APIKeyEnv       string   `toml:"api_key_env"`
	Timeout         Duration `toml:"timeout"`
	// MaxRetries is a pointer so that 0 (no retries) differs from unset.
	MaxRetries *int `toml:"max_retries"`
	// OfflineFallback summarizes offline when the provider's API key is
	// missing, instead of failing.
	OfflineFallback bool `toml:"offline_fallback"`
}

// ToolsConfig maps tools to output categories and file operations.
type ToolsConfig struct {
	Categories  map[string]string `toml:"categories"`
	Read        []string          `toml:"read"`
	Modify      []string          `toml:"modify"`
	OutputLimit tokencount.Tokens `toml:"output_tokens"`
}

// ServeConfig configures `compact-host serve`.
type ServeConfig struct {
	Addr            string   `toml:"addr"`
	TokenEnv        string   `toml:"token_env"`
	MaxRequestBytes int64    `toml:"max_request_bytes"`
	RequestTimeout  Duration `toml:"request_timeout"`
	BodyTimeout     Duration `toml:"body_timeout"`
}

// Duration is a time.Duration written as "90s" in TOML.
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration like 90s or 2m", b)
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Environment variables, each overriding the config key named beside it.
var envKeys = []struct{ env, key string }{
	{"COMPACT_HOST_MODEL", "model"},
	{"COMPACT_HOST_CONTEXT_WINDOW", "context_window"},
	{"COMPACT_HOST_STRATEGY", "strategy"},
	{"COMPACT_HOST_PLUGINS_DIR", "plugins_dir"},
	{"COMPACT_HOST_CACHE_DIR", "cache_dir"},
	{"COMPACT_HOST_LOG_LEVEL", "log_level"},
	{"COMPACT_HOST_PROVIDER", "provider.kind"},
	{"COMPACT_HOST_BASE_URL", "provider.base_url"},
	{"COMPACT_HOST_COMPACTION_MODEL", "provider.compaction_model"},
	{"COMPACT_HOST_STORE", "store"},
}

// ConfigError is a problem with the config file or an environment variable.
type ConfigError struct {
	Path string
	Line int
	Msg  string
}

func (e *ConfigError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// defaultConfigPath is $COMPACT_HOST_CONFIG, or config.toml in the user's
// config directory when it exists. getenv is the command's environment.
func defaultConfigPath(getenv func(string) string) string {
	if p := getenv("COMPACT_HOST_CONFIG"); p != "" {
		return p
	}
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		var err error
		if dir, err = os.UserConfigDir(); err != nil {
			return ""
		}
	}
	p := filepath.Join(dir, "compact-host", "config.toml")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// ParseConfig decodes a TOML config. Unknown keys and wrong types are
// errors that name the line.
func ParseConfig(path string, data []byte) (Config, error) {
	var c Config
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		var strict *toml.StrictMissingError
		if errors.As(err, &strict) && len(strict.Errors) > 0 {
			e := strict.Errors[0]
			row, _ := e.Position()
			key := strings.Join(e.Key(), ".")
			return c, &ConfigError{Path: path, Line: row, Msg: fmt.Sprintf("unknown key %q%s (see `compact-host help config` for the keys)",
				key, suggest.Hint(key, configKeys(reflect.TypeFor[Config](), "")))}
		}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, _ := de.Position()
			return c, &ConfigError{Path: path, Line: row, Msg: decodeMessage(de)}
		}
		return c, &ConfigError{Path: path, Msg: err.Error()}
	}
	c.src = configSource{path: path, data: data}
	return c, c.validate()
}

// configKeys lists the keys of t's TOML fields, tables' keys dotted
// under prefix: what a mistyped key is compared with.
func configKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		if ft := f.Type; ft.Kind() == reflect.Struct && ft != reflect.TypeFor[Duration]() {
			keys = append(keys, configKeys(ft, prefix+name+".")...)
			continue
		}
		keys = append(keys, prefix+name)
	}
	return keys
}

// validate checks every value of the file: the engine's fields through
// host.Config's own validation (one set of rules for the CLI, the server
// and the library), named by their keys; the CLI's own keys here.
func (c Config) validate() error {
	bad := func(key, format string, args ...any) error {
		return c.src.errorAt(key, fmt.Sprintf(format, args...))
	}
	switch c.Provider.Kind {
	case "", "anthropic", "openai", "none":
	default:
		return bad("provider.kind", "provider.kind %q: want anthropic, openai or none", c.Provider.Kind)
	}
	switch c.LogLevel {
	case "", "debug", "info", "warn", "error":
	default:
		return bad("log_level", "log_level %q: want debug, info, warn or error", c.LogLevel)
	}
	for _, f := range []struct {
		key string
		v   tokencount.Tokens
	}{{"context_window", c.ContextWindow}, {"max_output_tokens", c.MaxOutputTokens}, {"keep_recent_tokens", c.KeepRecent},
		{"summary_tokens", c.SummaryTokens}, {"tools.output_tokens", c.Tools.OutputLimit}} {
		if f.v < 0 || f.v > tokencount.Max {
			return bad(f.key, "%s %d: want 0 (the default) up to %d, written as %s", f.key, f.v, tokencount.Max, tokencount.Syntax)
		}
	}
	if err := c.engineConfig().Validate(); err != nil {
		return settingError(err, "", func(string) origin { return fromConfig }, c.src)
	}
	switch {
	case c.MaxInputBytes < 0:
		return bad("max_input_bytes", "max_input_bytes %d: want a positive byte count, or 0 for the default (%d)", c.MaxInputBytes, defaultMaxInputBytes)
	case c.Provider.Timeout.Duration < 0:
		return bad("provider.timeout", "provider.timeout %s: want a positive duration like 90s, or omit it for the default (%s)", c.Provider.Timeout, defaultProviderTimeout)
	case c.Provider.MaxRetries != nil && *c.Provider.MaxRetries < 0:
		return bad("provider.max_retries", "provider.max_retries %d: want 0 (no retries) or more", *c.Provider.MaxRetries)
	case c.Provider.MaxRetries != nil && *c.Provider.MaxRetries > 20:
		return bad("provider.max_retries", "provider.max_retries %d: want at most 20", *c.Provider.MaxRetries)
	case c.Serve.MaxRequestBytes < 0:
		return bad("serve.max_request_bytes", "serve.max_request_bytes %d: want a positive byte count, or 0 for the default", c.Serve.MaxRequestBytes)
	case c.Serve.RequestTimeout.Duration < 0:
		return bad("serve.request_timeout", "serve.request_timeout %s: want a positive duration, or omit it for the default", c.Serve.RequestTimeout)
	case c.Serve.BodyTimeout.Duration < 0:
		return bad("serve.body_timeout", "serve.body_timeout %s: want a positive duration, or omit it for the default", c.Serve.BodyTimeout)
	case c.Tools.OutputLimit < 0:
		return bad("tools.output_tokens", "tools.output_tokens %d: want a positive count, or 0 for the default", c.Tools.OutputLimit)
	}
	return nil
}

// engineConfig is the engine part of the file, flags not applied.
func (c Config) engineConfig() host.Config {
	return host.Config{
		Model: c.Model, ContextWindow: int(c.ContextWindow), MaxOutputTokens: int(c.MaxOutputTokens), Tokenizer: c.Tokenizer,
		Strategy: c.Strategy, Fallbacks: c.Fallbacks, KeepRecentTokens: int(c.KeepRecent), SummaryTokens: int(c.SummaryTokens),
		PruneThreshold: c.Thresholds.Prune, CompactThreshold: c.Thresholds.Compact, OverheadReserve: c.Thresholds.OverheadReserve,
		EmergencyThreshold: c.Thresholds.Emergency, MinSavings: c.Thresholds.MinSavings, DisableCompaction: c.Thresholds.Disable, ToolOutputTokens: int(c.Tools.OutputLimit),
		ToolCategories: c.Tools.Categories, FileTools: host.FileTools{Read: c.Tools.Read, Modify: c.Tools.Modify},
	}
}

// goTypeError is the decoder's wording of a value of the wrong type,
// which names Go fields and types.
var goTypeError = regexp.MustCompile(`cannot decode TOML (\w+) into struct field \S+ of type (\S+)`)

// decodeMessage words a decoding error with the key, not the Go field.
func decodeMessage(de *toml.DecodeError) string {
	msg := strings.TrimPrefix(de.Error(), "toml: ")
	if m := goTypeError.FindStringSubmatch(msg); m != nil {
		want := map[string]string{"int": "an integer", "int64": "an integer", "float64": "a number", "string": "a string",
			"bool": "true or false", "[]string": "a list of strings", "map[string]string": "a table of strings",
			"*int": "an integer", "cli.Duration": "a duration like \"90s\"",
			"tokencount.Tokens": tokencount.Syntax}[m[2]]
		if want == "" {
			want = "another type"
		}
		msg = fmt.Sprintf("want %s, not a TOML %s", want, m[1])
	}
	if k := de.Key(); len(k) > 0 {
		msg = strings.Join(k, ".") + ": " + msg
	}
	return msg
}

// applyEnv overrides c with the COMPACT_HOST_* variables that are set.
func (c *Config) applyEnv(getenv func(string) string) error {
	for _, k := range envKeys {
		v := getenv(k.env)
		if v == "" {
			continue
		}
		if c.src.env == nil {
			c.src.env = map[string]string{}
		}
		c.src.env[k.key] = k.env
		switch k.key {
		case "model":
			c.Model = v
		case "context_window":
			n, err := tokencount.Parse(v)
			if err != nil {
				return &ConfigError{Path: k.env, Msg: err.Error()}
			}
			c.ContextWindow = tokencount.Tokens(n)
		case "strategy":
			c.Strategy = v
		case "plugins_dir":
			c.PluginsDir = v
		case "cache_dir":
			c.CacheDir = v
		case "log_level":
			c.LogLevel = v
		case "provider.kind":
			c.Provider.Kind = v
		case "provider.base_url":
			c.Provider.BaseURL = v
		case "provider.compaction_model":
			c.Provider.CompactionModel = v
		case "store":
			c.Store = v
		}
	}
	return c.validate()
}

// loadConfig reads the config file (explicit path, or the default one if
// present) and applies the environment.
func loadConfig(path string, getenv func(string) string) (Config, string, error) {
	explicit := path != ""
	if !explicit {
		path = defaultConfigPath(getenv)
	}
	var c Config
	c.src.path = path
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			if explicit || !errors.Is(err, os.ErrNotExist) {
				return c, path, &ConfigError{Path: path, Msg: err.Error()}
			}
		} else if c, err = ParseConfig(path, data); err != nil {
			return c, path, err
		}
	}
	if err := c.applyEnv(getenv); err != nil {
		return c, path, err
	}
	return c, path, nil
}

// configReference is the text of `compact-host help config`.
const configReference = `compact-host reads a TOML config file from --config, $COMPACT_HOST_CONFIG,
or <user config dir>/compact-host/config.toml. Precedence, highest first:
flags, COMPACT_HOST_* environment variables, the file, defaults. An unknown
key is an error.

  model = "claude-sonnet-4-5"     # the agent's model: window and output limit from the catalog
  context_window = 0              # override the window (tokens)    env COMPACT_HOST_CONTEXT_WINDOW
                                  # every token count: 16000, 16_000, "16k" or "1.5m" (up to 32m)
  max_output_tokens = 0           # reply reserve (default: the model's output limit)
  tokenizer = "auto"              # auto | chars | o200k | cl100k
  strategy = "structured"         # structured | narrative | truncate | a plugin's name
  fallbacks = ["narrative", "truncate"]
  keep_recent_tokens = 0          # newest history kept verbatim (default: budget/4, max 40,000)
  summary_tokens = 0              # summary size asked for (default: a quarter of what is folded, from budget/20 in 1,000..8,000 up to budget/8, at most 3,000, where that is more)
  plugins_dir = ""                # default <user config dir>/compact-host/plugins
  cache_dir = ""                  # compiled wasm cache (default <user cache dir>/compact-host)
  log_level = "warn"              # debug | info | warn | error
  max_input_bytes = 268435456     # largest session or text read (256 MiB)  flag --max-input-bytes
  store = ""                      # compactions and serve's sessions: "" (disk, in the cache dir), a directory,
                                  # redis://host:6379/0 or memory   env COMPACT_HOST_STORE, flag --store

  [thresholds]                    # shares of the input budget
  prune = 0.70                    # shorten old oversized tool results above this
  compact = 0.85                  # compact above this, less the reserve
  overhead_reserve = 0.10
  emergency = 0.95                # no model call at or above this
  min_savings = 0.10              # compact only when that frees this share of the context; after one that
                                  # freed less, wait until the session grows by this share of the budget
  disable = false

  [provider]                      # omit for offline summaries
  kind = "anthropic"              # anthropic | openai | none   env COMPACT_HOST_PROVIDER
  base_url = ""                   # OpenAI-compatible servers: http://localhost:11434/v1 (Ollama)
  model = ""                      # default: model above
  compaction_model = ""           # a cheaper model for summaries
  api_key_env = ""                # default ANTHROPIC_API_KEY or OPENAI_API_KEY
  timeout = "2m"                  # each model call attempt      flag --provider-timeout
  max_retries = 2                 # retries of a failed call (0: none)
  offline_fallback = false        # with no API key, summarize offline instead of failing  flag --offline-fallback

  [tools]
  categories = { my_search = "match-list" }   # head-tail | match-list | file-content | generic
  read = []                       # more tools that read files (path in file_path or path)
  modify = []                     # more tools that modify files
  output_tokens = 0               # cap for 'compact-host truncate' and the API

  [serve]
  addr = "127.0.0.1:8377"          # flag --listen
  token_env = ""                  # env var holding a bearer token the API requires
  max_request_bytes = 67108864    # flag --max-request-bytes
  request_timeout = "5m"          # a request, its wait for a worker included  flag --request-timeout
  body_timeout = "30s"            # a request body must arrive within this      flag --body-timeout
`
