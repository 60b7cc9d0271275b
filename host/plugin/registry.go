package plugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/pluginapi"
)

// Entry is one plugin a Registry knows: loaded, waiting to be loaded (a
// built-in before its first use), or broken.
type Entry struct {
	// Name is the plugin's name: from its Info once loaded, from its
	// file name before, or when it failed to load.
	Name   string
	Path   string // empty for built-ins
	Source Source
	// Loaded says Info is known. It is false for a built-in not used
	// yet and for a broken plugin. A process plugin whose files the host
	// has seen before is listed from its cached Info, and its process
	// starts at its first use.
	Loaded bool
	Info   abi.Info
	// Err says why the plugin could not be loaded.
	Err error
	// Overridden marks a built-in replaced by a user plugin of its name.
	Overridden bool
}

// Registry finds plugins by name and category: the built-ins embedded in
// the binary (loaded on first use) and the plugins of a directory, which
// it watches. A plugin that fails to load is reported in List and the log,
// and skipped. A Registry is safe for concurrent use.
type Registry struct {
	opts   Options
	dir    string
	logger *slog.Logger
	engine pluginapi.WasmEngine // nil without Options.Wasm
	infos  *infoCache

	mu       sync.Mutex
	builtins map[string]*slot // by name
	user     map[string]*slot // by path
	closed   bool

	watcher *fsnotify.Watcher
	timers  map[string]*time.Timer
	done    chan struct{}
	// life ends when the registry closes: every load, the watcher's
	// included, gives up then, killing a process plugin that is still
	// starting.
	life    context.Context
	endLife context.CancelFunc
	// loads are the loads in flight of the directory's files, by path:
	// a newer load of a path (the file changed or went) stops an older
	// one, whose process would otherwise outlive its file.
	loads map[string]*load
	// wg counts the work Close waits for: the watcher, reloads, lazy
	// loads and the closing of replaced plugins, so that no plugin
	// process outlives a closed registry.
	wg sync.WaitGroup
}

// load is one load in flight of a plugins directory file.
type load struct{ cancel context.CancelFunc }

// slot holds one plugin of the registry.
type slot struct {
	entry  Entry
	plugin *Plugin
	// loading is closed when a lazy load finishes.
	loading chan struct{}
	// manifest is set for a process plugin known from the info cache and
	// not started yet.
	manifest *Manifest
	// size and modTime identify the file version loaded.
	size    int64
	modTime time.Time
	// command is a process plugin's executable, and commandStamp its
	// version when loaded, so replacing the executable reloads too.
	command      string
	commandStamp string
}

// stampOf identifies a version of the file at path, or "" if it is missing.
func stampOf(path string) string {
	info, err := os.Stat(path)
	if err != nil {
		return ""
	}
	return fmt.Sprint(info.Size(), info.ModTime().UnixNano())
}

func (s *slot) stamp(info os.FileInfo) { s.size, s.modTime = info.Size(), info.ModTime() }

// NewRegistry returns a Registry of the built-ins and the plugins in the
// plugins directory, which it loads now. A missing directory is not an
// error: it is simply empty, and not watched.
func NewRegistry(ctx context.Context, opts Options) (*Registry, error) {
	dir, err := opts.pluginsDir()
	if err != nil {
		return nil, err
	}
	if opts.Builtins != nil && opts.Wasm == nil {
		return nil, errors.New("plugin: Options.Builtins are wasm modules and need Options.Wasm")
	}
	engine, err := opts.wasmEngine()
	if err != nil {
		return nil, err
	}
	if opts.WatchDebounce <= 0 {
		opts.WatchDebounce = 250 * time.Millisecond
	}
	r := &Registry{
		opts: opts, dir: dir, logger: opts.logger(), engine: engine, infos: newInfoCache(opts),
		builtins: map[string]*slot{}, user: map[string]*slot{},
		timers: map[string]*time.Timer{}, done: make(chan struct{}), loads: map[string]*load{},
	}
	r.life, r.endLife = context.WithCancel(context.Background())
	if opts.Builtins != nil {
		for _, name := range opts.Builtins.Names() {
			r.builtins[name] = &slot{entry: Entry{Name: name, Source: SourceBuiltin}}
		}
	}
	if err := r.Rescan(ctx); err != nil {
		r.Close()
		return nil, err
	}
	if !opts.NoWatch {
		if err := r.watch(); err != nil {
			r.logger.Warn("plugins directory is not watched", "dir", dir, "err", err)
		}
	}
	return r, nil
}

// Dir is the plugins directory.
func (r *Registry) Dir() string { return r.dir }

// isPluginFile reports whether name is a file the registry loads.
func isPluginFile(name string) bool {
	return strings.HasSuffix(name, ".wasm") || strings.HasSuffix(name, ManifestSuffix)
}

// Rescan loads the plugins directory again: new and changed files are
// loaded, removed ones closed. The watcher calls it for you.
func (r *Registry) Rescan(ctx context.Context) error {
	entries, err := os.ReadDir(r.dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("plugin: read plugins directory: %w", err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() || !isPluginFile(e.Name()) {
			continue
		}
		path := filepath.Join(r.dir, e.Name())
		seen[path] = true
		r.reload(ctx, path)
	}
	r.mu.Lock()
	var gone []string
	for path := range r.user {
		if !seen[path] {
			gone = append(gone, path)
		}
	}
	r.mu.Unlock()
	for _, path := range gone {
		r.reload(ctx, path)
	}
	return nil
}

// reload (re)loads the plugin at path, or forgets it if the file is gone.
// A file whose content did not change is left alone. It stops a load of
// path still in flight, and gives up itself when ctx ends or the registry
// closes.
func (r *Registry) reload(ctx context.Context, path string) {
	ctx, ld, ok := r.beginLoad(ctx, path)
	if !ok {
		return
	}
	defer ld.cancel()
	info0, statErr := os.Stat(path)
	r.mu.Lock()
	old := r.user[path]
	r.mu.Unlock()
	if statErr != nil {
		if old != nil && r.endLoad(path, ld) {
			r.logger.Info("plugin removed", "path", path, "plugin", old.entry.Name)
			r.replace(path, nil)
		}
		return
	}
	if old != nil && old.entry.Err == nil && sameFile(old, info0) && (old.command == "" || stampOf(old.command) == old.commandStamp) {
		return
	}
	s := &slot{entry: Entry{Name: nameFromPath(path), Path: path}}
	var p *Plugin
	var err error
	if strings.HasSuffix(path, ".wasm") {
		s.entry.Source = SourceWasm
		var bin []byte
		if bin, err = readRegular(path, r.opts.maxFileBytes(), "plugin.Options.MaxFileBytes"); err != nil {
			err = &Error{Kind: ErrInvalidPlugin, Plugin: s.entry.Name, Path: path, Op: "load", Err: err}
		} else if r.engine == nil {
			err = noRuntime(path, "Wasm")
		} else {
			p, err = loadWasm(ctx, r.engine, bin, path, SourceWasm, r.opts)
		}
	} else {
		s.entry.Source = SourceProcess
		var m Manifest
		var raw []byte
		if m, raw, err = readManifest(path); err == nil && r.opts.Process == nil {
			err = noRuntime(path, "Process")
		} else if err == nil {
			cfg, _ := m.procConfig() // checked by readManifest
			if filepath.IsAbs(cfg.Command) {
				s.command, s.commandStamp = cfg.Command, stampOf(cfg.Command)
			}
			key := r.infos.key(raw, cfg.Command, r.opts)
			if info, ok := r.infos.get(key); ok {
				s.manifest = &m
				s.entry.Loaded, s.entry.Info, s.entry.Name = true, info, info.Name
				if !r.endLoad(path, ld) {
					return
				}
				r.logger.Info("plugin known from its cached info; it starts at its first use", "path", path, "plugin", info.Name)
				s.stamp(info0)
				r.replace(path, s)
				return
			}
			if p, err = StartProcess(ctx, m, r.opts); err == nil {
				if perr := r.infos.put(key, p.Info()); perr != nil {
					r.logger.Warn("process plugin's info not cached; it will be started to list it", "path", path, "err", perr)
				}
			}
		}
	}
	if !r.endLoad(path, ld) {
		// A newer load of the file, or Close, stopped this one.
		if p != nil {
			p.Close()
		}
		return
	}
	s.entry.Err = err
	if err != nil {
		r.logger.Error("plugin failed to load; skipped", "path", path, "err", err)
	} else {
		s.plugin = p
		s.entry.Loaded, s.entry.Info, s.entry.Name = true, p.Info(), p.Name()
		r.logger.Info("plugin loaded", "path", path, "plugin", p.Name(), "version", p.Info().Version, "kinds", p.Info().Kinds)
	}
	s.entry.Info.Name = s.entry.Name
	s.stamp(info0)
	r.replace(path, s)
}

// beginLoad registers a load of path, stopping the one in flight, and
// returns its context: ctx, ended also by a newer load and by Close. ok
// is false once the registry is closed.
func (r *Registry) beginLoad(ctx context.Context, path string) (context.Context, *load, bool) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(r.life, cancel)
	ld := &load{cancel: func() { stop(); cancel() }}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		ld.cancel()
		return nil, nil, false
	}
	if prev := r.loads[path]; prev != nil {
		prev.cancel()
	}
	r.loads[path] = ld
	return ctx, ld, true
}

// endLoad reports whether ld is still path's newest load, and ends its
// registration; a load that a newer one or Close stopped installs
// nothing.
func (r *Registry) endLoad(path string, ld *load) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.loads[path] != ld {
		return false
	}
	delete(r.loads, path)
	return !r.closed
}

// sameFile tells an unchanged file by size and modification time.
func sameFile(s *slot, info os.FileInfo) bool {
	return s.size == info.Size() && s.modTime.Equal(info.ModTime())
}

// replace installs s at path (nil removes the entry) and closes the
// plugin it replaces once that plugin's calls in flight have returned.
func (r *Registry) replace(path string, s *slot) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		if s != nil && s.plugin != nil {
			s.plugin.Close()
		}
		return
	}
	old := r.user[path]
	if s == nil {
		delete(r.user, path)
	} else {
		r.user[path] = s
		if _, ok := r.builtins[s.entry.Name]; ok && s.entry.Err == nil {
			r.logger.Info("user plugin overrides the built-in of the same name", "plugin", s.entry.Name, "path", path)
		}
	}
	if old != nil && old.plugin != nil {
		// Closed once its calls in flight return, which may take a
		// while: Close waits for it.
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			old.plugin.Close()
		}()
	}
	r.mu.Unlock()
}

// Strategy returns the strategy plugin called name: a user plugin of that
// name, or else the built-in. ErrNotFound when there is none.
func (r *Registry) Strategy(ctx context.Context, name string) (*Plugin, error) {
	r.mu.Lock()
	var candidates []*slot
	for _, s := range r.sortedUser() {
		if s.entry.Loaded && s.entry.Name == name && s.entry.Info.Has(abi.KindStrategy) {
			candidates = append(candidates, s)
		}
	}
	b := r.builtins[name]
	r.mu.Unlock()
	for _, s := range candidates {
		if p, err := r.userPlugin(ctx, s); err == nil && p.Info().Has(abi.KindStrategy) {
			return p, nil
		}
	}
	if b != nil {
		p, err := r.loadBuiltin(ctx, b)
		if err != nil {
			return nil, err
		}
		if p.Info().Has(abi.KindStrategy) {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: no strategy %q", ErrNotFound, name)
}

// Truncator returns the truncator plugin for a tool-output category: a
// user plugin declaring it (in file name order), or else a built-in.
// ErrNotFound when there is none.
func (r *Registry) Truncator(ctx context.Context, category string) (*Plugin, error) {
	r.mu.Lock()
	var candidates []*slot
	for _, s := range r.sortedUser() {
		if s.entry.Loaded && s.entry.Info.Has(abi.KindTruncator) && slices.Contains(s.entry.Info.Categories, category) {
			candidates = append(candidates, s)
		}
	}
	var builtins []*slot
	for _, name := range r.builtinNames() {
		if b, ok := r.builtins[name]; ok {
			builtins = append(builtins, b)
		}
	}
	r.mu.Unlock()
	for _, s := range candidates {
		if p, err := r.userPlugin(ctx, s); err == nil && slices.Contains(p.Info().Categories, category) {
			return p, nil
		}
	}
	// The categories of a built-in are known only once it is loaded, so
	// the first truncator lookup loads the built-ins in turn.
	for _, b := range builtins {
		p, err := r.loadBuiltin(ctx, b)
		if err != nil {
			continue
		}
		if info := p.Info(); info.Has(abi.KindTruncator) && slices.Contains(info.Categories, category) {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: no truncator for category %q", ErrNotFound, category)
}

// sortedUser returns the loaded user plugins in path order; r.mu is held.
func (r *Registry) sortedUser() []*slot {
	out := make([]*slot, 0, len(r.user))
	for _, s := range r.user {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].entry.Path < out[j].entry.Path })
	return out
}

// loadBuiltin loads a built-in on its first use.
func (r *Registry) loadBuiltin(ctx context.Context, b *slot) (*Plugin, error) {
	return r.loadLazily(ctx, b, func(ctx context.Context) (*Plugin, error) {
		bin, _ := r.opts.Builtins.Wasm(b.entry.Name)
		return loadWasm(ctx, r.engine, bin, "", SourceBuiltin, r.opts)
	})
}

// builtinNames lists the built-ins in name order.
func (r *Registry) builtinNames() []string {
	if r.opts.Builtins == nil {
		return nil
	}
	return r.opts.Builtins.Names()
}

// userPlugin returns the plugin of a user slot, starting a process plugin
// known from the info cache at its first use.
func (r *Registry) userPlugin(ctx context.Context, s *slot) (*Plugin, error) {
	r.mu.Lock()
	p, m := s.plugin, s.manifest
	r.mu.Unlock()
	if p != nil {
		return p, nil
	}
	if m == nil {
		return nil, s.entry.Err
	}
	return r.loadLazily(ctx, s, func(ctx context.Context) (*Plugin, error) {
		return StartProcess(ctx, *m, r.opts)
	})
}

// loadLazily loads the plugin of slot b with open on its first use;
// concurrent first uses share one load. A failed load is remembered and
// reported in List.
func (r *Registry) loadLazily(ctx context.Context, b *slot, open func(context.Context) (*Plugin, error)) (*Plugin, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, &Error{Kind: ErrClosed, Plugin: b.entry.Name, Op: "load"}
	}
	if b.loading != nil {
		ch := b.loading
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if b.entry.Err != nil {
			return nil, b.entry.Err
		}
		if b.plugin == nil {
			return nil, &Error{Kind: ErrClosed, Plugin: b.entry.Name, Path: b.entry.Path, Op: "load"}
		}
		return b.plugin, nil
	}
	if b.plugin != nil {
		r.mu.Unlock()
		return b.plugin, nil
	}
	b.loading = make(chan struct{})
	r.wg.Add(1)
	defer r.wg.Done()
	r.mu.Unlock()

	// The load is shared: one caller giving up must not fail the others;
	// the registry closing stops it.
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(r.life, cancel)
	p, err := open(lctx)
	stop()
	cancel()
	r.mu.Lock()
	defer close(b.loading)
	if err != nil {
		b.entry.Err, b.entry.Loaded, b.manifest = err, false, nil
		r.logger.Error("plugin failed to load", "plugin", b.entry.Name, "path", b.entry.Path, "err", err)
		r.mu.Unlock()
		return nil, err
	}
	if r.closed || (b.entry.Path != "" && r.user[b.entry.Path] != b) {
		// Closed or replaced while it loaded: nobody else will close it.
		r.mu.Unlock()
		p.Close()
		return nil, &Error{Kind: ErrClosed, Plugin: b.entry.Name, Path: b.entry.Path, Op: "load"}
	}
	defer r.mu.Unlock()
	b.plugin, b.manifest = p, nil
	b.entry.Loaded, b.entry.Info = true, p.Info()
	if b.entry.Path != "" {
		b.entry.Name = p.Name()
	}
	return p, nil
}

// List reports every plugin: the built-ins (loading them, to show their
// Info), then the user plugins in path order, broken ones included.
func (r *Registry) List(ctx context.Context) []Entry {
	r.mu.Lock()
	var builtins []*slot
	for _, name := range r.builtinNames() {
		if b, ok := r.builtins[name]; ok {
			builtins = append(builtins, b)
		}
	}
	r.mu.Unlock()
	for _, b := range builtins {
		_, _ = r.loadBuiltin(ctx, b)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Entry
	overridden := map[string]bool{}
	for _, s := range r.user {
		if s.entry.Err == nil {
			overridden[s.entry.Name] = true
		}
	}
	for _, b := range builtins {
		e := b.entry
		e.Overridden = overridden[e.Name]
		out = append(out, e)
	}
	for _, s := range r.sortedUser() {
		out = append(out, s.entry)
	}
	return out
}

// Close stops watching and closes every plugin.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	close(r.done)
	r.endLife()
	for _, t := range r.timers {
		t.Stop()
	}
	var plugins []*Plugin
	for _, s := range r.user {
		if s.plugin != nil {
			plugins = append(plugins, s.plugin)
		}
	}
	for _, b := range r.builtins {
		if b.plugin != nil {
			plugins = append(plugins, b.plugin)
		}
	}
	r.mu.Unlock()
	var err error
	if r.watcher != nil {
		err = r.watcher.Close()
	}
	r.wg.Wait()
	for _, p := range plugins {
		p.Close()
	}
	if r.engine != nil {
		if cerr := r.engine.Close(context.Background()); err == nil {
			err = cerr
		}
	}
	return err
}

// watch starts watching the plugins directory. Editors and copies write a
// file in several steps, so a path is reloaded only once it has been quiet
// for the debounce interval.
func (r *Registry) watch() error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	if err := w.Add(r.dir); err != nil {
		w.Close()
		return err
	}
	r.watcher = w
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			select {
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if isPluginFile(filepath.Base(ev.Name)) {
					r.debounce(ev.Name)
				} else {
					// A process plugin's executable may sit in the
					// directory: replacing it reloads its manifest.
					for _, manifest := range r.manifestsOf(ev.Name) {
						r.debounce(manifest)
					}
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				r.logger.Warn("watching plugins directory", "dir", r.dir, "err", err)
			case <-r.done:
				return
			}
		}
	}()
	return nil
}

// manifestsOf returns the manifests whose command is the file at path.
func (r *Registry) manifestsOf(path string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for manifest, s := range r.user {
		if s.command != "" && s.command == path {
			out = append(out, manifest)
		}
	}
	return out
}

func (r *Registry) debounce(path string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if t, ok := r.timers[path]; ok {
		t.Reset(r.opts.WatchDebounce)
		return
	}
	r.timers[path] = time.AfterFunc(r.opts.WatchDebounce, func() {
		r.mu.Lock()
		delete(r.timers, path)
		if r.closed {
			r.mu.Unlock()
			return
		}
		r.wg.Add(1)
		r.mu.Unlock()
		defer r.wg.Done()
		r.reload(r.life, path)
	})
}
