package server

import "path/filepath"

// CLICacheDir is a cache_dir for the CLI's config whose compiled modules
// are the ones this test binary already compiled.
func CLICacheDir() string { return filepath.Dir(cacheDir) }
