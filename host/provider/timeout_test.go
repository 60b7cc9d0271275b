package provider_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/compact-host/compact-host/host/provider"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A provider that never answers, in either wire format, fails each
// attempt at the configured timeout with a *TimeoutError; OnRetry hears
// of every retry, numbered, before its wait.
func TestStalledProviderTimesOutAndReportsRetries(t *testing.T) {
	for _, a := range apis {
		t.Run(a.kind, func(t *testing.T) {
			srv := newFakeAPI(t, stall)
			cfg := a.config(srv.URL)
			cfg.Timeout = 100 * time.Millisecond
			var retries []provider.Retry
			cfg.OnRetry = func(r provider.Retry) { retries = append(retries, r) }
			c := newClient(t, cfg)
			_, err := c.Complete(context.Background(), summarizeRequest)
			var te *provider.TimeoutError
			require.ErrorAs(t, err, &te)
			assert.True(t, errors.Is(err, provider.ErrTimeout))
			assert.Equal(t, 100*time.Millisecond, te.Timeout)
			require.Len(t, retries, 2)
			for i, r := range retries {
				assert.Equal(t, i+1, r.Attempt)
				assert.Equal(t, 3, r.MaxAttempts)
				assert.ErrorIs(t, r.Err, provider.ErrTimeout)
			}
			assert.Len(t, srv.requests(), 3)
		})
	}
}

// Settings that cannot work are a *ConfigError naming the field.
func TestConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		cfg   provider.Config
		field string
	}{
		{provider.Config{Kind: "gemini", APIKey: "k", Model: "m"}, "Kind"},
		{provider.Config{Kind: provider.KindAnthropic, APIKey: "k"}, "CompactionModel"},
		{provider.Config{Kind: provider.KindOpenAI, BaseURL: "localhost:8080", Model: "m"}, "BaseURL"},
		{provider.Config{Kind: provider.KindAnthropic, APIKey: "k", Model: "m", Timeout: -time.Second}, "Timeout"},
	} {
		_, err := provider.New(tc.cfg)
		var ce *provider.ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, tc.field, ce.Field)
	}
	assert.Equal(t, 2*time.Minute, provider.DefaultTimeout, "the documented default")
}
