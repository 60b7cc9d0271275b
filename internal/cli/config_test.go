package cli

import (
	"errors"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	good := `model = "gpt-4o"
strategy = "narrative"
fallbacks = ["truncate"]
[thresholds]
prune = 0.6
[provider]
kind = "openai"
base_url = "http://localhost:11434/v1"
timeout = "90s"
[tools]
categories = { my_search = "match-list" }
`
	c, err := ParseConfig("c.toml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "gpt-4o" || c.Thresholds.Prune != 0.6 || c.Provider.Timeout.Seconds() != 90 || c.Tools.Categories["my_search"] != "match-list" {
		t.Fatalf("parsed %+v", c)
	}
	for name, tc := range map[string]struct{ text, want string }{
		"unknown key":     {"model = \"x\"\nmodle = \"y\"\n", `c.toml:2: unknown key "modle"`},
		"unknown section": {"[provder]\nkind = \"openai\"\n", `unknown key "provder"`},
		"wrong type":      {"context_window = \"big\"\n", "c.toml:1"},
		"bad duration":    {"[provider]\ntimeout = \"soon\"\n", "not a duration"},
		"bad kind":        {"[provider]\nkind = \"gemini\"\n", "want anthropic, openai or none"},
		"bad share":       {"[thresholds]\ncompact = 85\n", "between 0 and 1"},
		"bad toml":        {"model = \n", "c.toml:1"},
	} {
		_, err := ParseConfig("c.toml", []byte(tc.text))
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
}

func TestEnvOverridesFileAndFlagsOverrideEnv(t *testing.T) {
	c, err := ParseConfig("c.toml", []byte("model = \"from-file\"\ncontext_window = 1000\n"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"COMPACT_HOST_MODEL": "from-env", "COMPACT_HOST_CONTEXT_WINDOW": "5000"}
	if err := c.applyEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if c.Model != "from-env" || c.ContextWindow != 5000 {
		t.Fatalf("env did not override the file: %+v", c)
	}
	a := &app{cfg: c, flags: engineFlags{contextWindow: 9000}}
	hc := a.hostConfig()
	if hc.Model != "from-env" || hc.ContextWindow != 9000 {
		t.Fatalf("flags did not override the env: %+v", hc)
	}
	env["COMPACT_HOST_CONTEXT_WINDOW"] = "lots"
	if err := c.applyEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "COMPACT_HOST_CONTEXT_WINDOW") {
		t.Fatalf("bad env value: %v", err)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("model = \"gpt-4o\"\n[thresholds]\nprune = 0.5\n"))
	f.Add([]byte("[provider]\ntimeout = \"2m\"\n[tools]\ncategories = { a = \"b\" }\n"))
	f.Add([]byte("fallbacks = [\"a\", 1]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := ParseConfig("f.toml", data)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			if !strings.HasPrefix(err.Error(), "f.toml") {
				t.Fatalf("error does not name the file: %v", err)
			}
		}
	})
}
