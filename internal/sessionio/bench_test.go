package sessionio

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/compact-host/compact-host/host"
)

// BenchmarkReadCorpus reads each agent session of ../shared/corpus and
// ../shared/corpus-new as inspect and compact do: the live context, the
// recorded usage, the agent's overhead.
func BenchmarkReadCorpus(b *testing.B) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		b.Fatal(err)
	}
	var files []string
	for _, folder := range []string{"corpus", "corpus-new"} {
		names, _ := filepath.Glob(filepath.Join(root, "shared", folder, "*"))
		files = append(files, names...)
	}
	if len(files) == 0 {
		b.Skip("../shared/corpus is not beside the repository")
	}
	e, err := host.New(host.Config{ContextWindow: 200000, Tokenizer: "chars"})
	if err != nil {
		b.Fatal(err)
	}
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Read(e, path, data, ""); err != nil {
			continue // not a session (a UI log)
		}
		b.Run(filepath.Base(path), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Read(e, path, data, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
