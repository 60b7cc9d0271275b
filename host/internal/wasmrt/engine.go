// Package wasmrt runs wasm plugins with wazero: compile once through an
// on-disk cache, one runtime per plugin so its memory limit holds, a pool of
// instances for concurrent calls, and the compact_host_v1 host module.
package wasmrt

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"

	"github.com/tetratelabs/wazero"

	"github.com/compact-host/compact-host/host/internal/pluginapi"
)

// Defaults of Config.
const (
	DefaultMemoryLimitPages = 4096     // 256 MiB of 64 KiB pages
	DefaultMaxOutputBytes   = 64 << 20 // 64 MiB
	DefaultRecycleBytes     = 64 << 20 // an instance whose memory grew past this is dropped after its call
)

// Config configures an Engine. The zero value is valid: no on-disk cache
// and the defaults above.
type Config struct {
	// CacheDir holds compiled modules across runs. Empty keeps them in
	// memory for the Engine's life only.
	CacheDir string
	// MemoryLimitPages bounds the linear memory of each instance.
	MemoryLimitPages uint32
	// MaxOutputBytes bounds the answer frame of one call; it is checked
	// before the answer is copied out of the instance.
	MaxOutputBytes int
	// RecycleBytes is the memory size past which an instance is closed
	// after its call instead of going back to the pool.
	RecycleBytes uint64
	// MaxInstances bounds the instances of one plugin, so the concurrent
	// calls to it; further calls wait. Zero means GOMAXPROCS, at least 2.
	MaxInstances int
	// Logger receives the plugins' log lines, stdout and stderr.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MemoryLimitPages == 0 {
		c.MemoryLimitPages = DefaultMemoryLimitPages
	}
	if c.MaxOutputBytes <= 0 {
		c.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if c.RecycleBytes == 0 {
		c.RecycleBytes = DefaultRecycleBytes
	}
	if c.MaxInstances <= 0 {
		c.MaxInstances = max(2, runtime.GOMAXPROCS(0))
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Engine loads wasm plugins. Loads of the same bytes share one compiled
// module and its instances, however many callers load it at once. An
// Engine is safe for concurrent use.
type Engine struct {
	cfg   Config
	cache wazero.CompilationCache

	mu      sync.Mutex
	modules map[moduleKey]*shared
}

// moduleKey identifies a loaded module by the SHA-256 of its bytes.
type moduleKey [32]byte

// shared is a module being loaded or loaded, with the number of handles
// that refer to it.
type shared struct {
	ready chan struct{}
	mod   *module
	err   error
	refs  int
}

// NewEngine returns an Engine. With cfg.CacheDir set, compiled code is kept
// there and reused by later Engines.
func NewEngine(cfg Config) (*Engine, error) {
	cfg = cfg.withDefaults()
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		var err error
		if cache, err = wazero.NewCompilationCacheWithDir(cfg.CacheDir); err != nil {
			return nil, fmt.Errorf("wasmrt: compilation cache %s: %w", cfg.CacheDir, err)
		}
	} else {
		cache = wazero.NewCompilationCache()
	}
	return &Engine{cfg: cfg, cache: cache, modules: map[moduleKey]*shared{}}, nil
}

// Load compiles bin (or takes it from the cache), checks that it is a
// plugin of this ABI major, instantiates it once and asks for its Info.
// path is only used in errors and logs. The caller closes the Module.
//
// The module runs under every limit of the Config, and its code is
// stopped when a call's context is done: a plugin stuck in a loop costs
// its caller nothing past the deadline.
func (e *Engine) Load(ctx context.Context, path string, bin []byte) (*Module, error) {
	key := moduleKey(sha256.Sum256(bin))
	for {
		e.mu.Lock()
		s, ok := e.modules[key]
		if !ok {
			s = &shared{ready: make(chan struct{})}
			e.modules[key] = s
		}
		s.refs++
		e.mu.Unlock()
		if !ok {
			s.mod, s.err = e.compile(ctx, path, bin)
			if s.err != nil {
				// Later loads compile afresh: the failure may be this
				// caller's deadline.
				e.mu.Lock()
				if e.modules[key] == s {
					delete(e.modules, key)
				}
				e.mu.Unlock()
			}
			close(s.ready)
		}
		select {
		case <-s.ready:
		case <-ctx.Done():
			e.release(key, s)
			return nil, &pluginapi.Error{Kind: pluginapi.ErrDeadlineExceeded, Path: path, Op: "load",
				Err: fmt.Errorf("waiting for another load of the same module: %w", ctx.Err())}
		}
		if s.err == nil {
			return &Module{module: s.mod, release: func() { e.release(key, s) }}, nil
		}
		e.release(key, s)
		if ok && errors.Is(s.err, pluginapi.ErrDeadlineExceeded) && ctx.Err() == nil {
			continue // the deadline was the other caller's, not this one's
		}
		return nil, asDeadline(ctx, path, "load", s.err)
	}
}

// asDeadline reports err as a deadline error when ctx is done: whatever
// the runtime said as the context ended (a trap from the interrupt check,
// a closed module, an exit code, a compilation cut short) is its
// consequence, and the caller must be able to tell its own deadline from
// a broken plugin.
func asDeadline(ctx context.Context, path, op string, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, pluginapi.ErrDeadlineExceeded) {
		return err
	}
	return &pluginapi.Error{Kind: pluginapi.ErrDeadlineExceeded, Path: path, Op: op, Err: fmt.Errorf("%w (%v)", ctx.Err(), err)}
}

// release drops one handle of s, closing the module with the last one.
func (e *Engine) release(key moduleKey, s *shared) {
	e.mu.Lock()
	s.refs--
	last := s.refs == 0
	if last && e.modules[key] == s {
		delete(e.modules, key)
	}
	e.mu.Unlock()
	if last && s.mod != nil {
		s.mod.close(context.Background())
	}
}

// Close closes the compilation cache. Modules already loaded keep working
// until they are closed.
func (e *Engine) Close(ctx context.Context) error {
	return e.cache.Close(ctx)
}
