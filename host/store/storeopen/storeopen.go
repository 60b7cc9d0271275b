// Package storeopen opens the store a URL names, so that the proxy and the
// service take one setting (flag --store, config key store, environment
// COMPACT_HOST_STORE) for every kind of store. It is a package of its own
// because it links the Redis client, which package store must not.
package storeopen

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/host/store/redisstore"
)

// The names of the setting, for the command line and config loaders.
const (
	Flag      = "store"
	ConfigKey = "store"
	EnvVar    = "COMPACT_HOST_STORE"
)

// Usage describes the accepted URLs, for a flag's help and for errors.
const Usage = `"" or "disk" (the embedded store in <user cache dir>/compact-host/store), ` +
	`"file:///dir" or a directory path (the embedded store there; parameters max_bytes, max_records, max_record_bytes, guard_wait, max_session_bytes, max_sessions), ` +
	`"redis://[user:password@]host:port/db" ("rediss://" for TLS, "unix:///path.sock"; parameters ttl, prefix, call_timeout, max_record_bytes, max_session_bytes, and go-redis's dial_timeout, read_timeout, write_timeout, pool_size...), ` +
	`"memory" (this process only, lost on exit)`

// Options are what the URL cannot say.
type Options struct {
	// DiskDir replaces the default directory of "" and "disk", e.g.
	// <cache_dir>/store when the configuration moves the cache.
	DiskDir string
	// Logger receives the disk store's reports of corrupt files.
	Logger *slog.Logger
}

// Open opens the store rawURL names. Errors name the setting and the
// accepted forms.
func Open(ctx context.Context, rawURL string, opts Options) (store.Store, error) {
	switch rawURL {
	case "", "disk":
		dir := opts.DiskDir
		if dir == "" {
			var err error
			if dir, err = store.DefaultDir(); err != nil {
				return nil, err
			}
		}
		return store.OpenDisk(dir, store.DiskOptions{Logger: opts.Logger})
	case "memory", "memory:":
		return store.NewMemory(), nil
	}
	scheme, _, hasScheme := strings.Cut(rawURL, "://")
	switch {
	case !hasScheme:
		return openDisk(filepath.Clean(rawURL), nil, opts)
	case scheme == "file":
		u, err := url.Parse(rawURL)
		if err != nil || u.Path == "" || (u.Host != "" && u.Host != "localhost") {
			return nil, badURL(rawURL, "a file URL is file:///absolute/dir")
		}
		return openDisk(u.Path, u.Query(), opts)
	case scheme == "redis" || scheme == "rediss" || scheme == "unix":
		s, err := redisstore.Open(ctx, rawURL, redisstore.Options{})
		if err != nil {
			return nil, fmt.Errorf("store (--%s, %s, config key %s): %w", Flag, EnvVar, ConfigKey, err)
		}
		return s, nil
	}
	return nil, badURL(rawURL, "unknown scheme "+strconv.Quote(scheme))
}

func openDisk(dir string, q url.Values, opts Options) (store.Store, error) {
	do := store.DiskOptions{Logger: opts.Logger}
	for name, vals := range q {
		v := vals[0]
		var err error
		switch name {
		case "max_bytes":
			do.MaxBytes, err = strconv.ParseInt(v, 10, 64)
		case "max_records":
			do.MaxRecords, err = strconv.Atoi(v)
		case "max_record_bytes":
			do.MaxRecordBytes, err = strconv.Atoi(v)
		case "guard_wait":
			do.GuardWait, err = time.ParseDuration(v)
		case "max_session_bytes":
			do.MaxSessionBytes, err = strconv.Atoi(v)
		case "max_sessions":
			do.MaxSessions, err = strconv.Atoi(v)
		default:
			return nil, fmt.Errorf("store URL parameter %q is unknown for the disk store (--%s, %s, config key %s): it takes max_bytes, max_records, max_record_bytes, guard_wait, max_session_bytes, max_sessions", name, Flag, EnvVar, ConfigKey)
		}
		if err != nil {
			return nil, fmt.Errorf("store URL parameter %s=%q (--%s, %s, config key %s): %w", name, v, Flag, EnvVar, ConfigKey, err)
		}
	}
	return store.OpenDisk(dir, do)
}

func badURL(rawURL, why string) error {
	if u, err := url.Parse(rawURL); err == nil {
		rawURL = u.Redacted()
	}
	return fmt.Errorf("store %q (--%s, %s, config key %s): %s; accepted: %s", rawURL, Flag, EnvVar, ConfigKey, why, Usage)
}
