package eval

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// CorpusDir is the shared corpus of real sessions: ../shared/corpus
// relative to the repository root, found by walking up from the working
// directory to the go.mod of the module.
func CorpusDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && !nested(dir) {
			corpus := filepath.Join(dir, "..", "shared", "corpus")
			if st, err := os.Stat(corpus); err != nil || !st.IsDir() {
				return "", fmt.Errorf("eval: no corpus at %s", corpus)
			}
			return filepath.Clean(corpus), nil
		}
		if filepath.Dir(dir) == dir {
			return "", errors.New("eval: no go.mod above the working directory")
		}
	}
}

// CorpusDirs are the folders of real sessions beside the repository:
// CorpusDir, then ../shared/corpus-new when it is there (sessions of more
// agents, kept apart from the first corpus).
func CorpusDirs() ([]string, error) {
	dir, err := CorpusDir()
	if err != nil {
		return nil, err
	}
	dirs := []string{dir}
	newer := filepath.Join(filepath.Dir(dir), "corpus-new")
	if st, err := os.Stat(newer); err == nil && st.IsDir() {
		dirs = append(dirs, newer)
	}
	return dirs, nil
}

// nested reports whether dir is a module nested in the repository (abi/,
// sdk/), whose go.mod is not the root's.
func nested(dir string) bool {
	_, err := os.Stat(filepath.Join(filepath.Dir(dir), "go.mod"))
	return err == nil
}

// CorpusSessions lists the regular files of dir, sorted by name.
func CorpusSessions(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("eval: read corpus: %w", err)
	}
	var out []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}
