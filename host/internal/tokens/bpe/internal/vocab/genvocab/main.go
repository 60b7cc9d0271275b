// Command genvocab writes package bpe's vocabulary files into the current
// directory (go generate runs it in host/internal/tokens/bpe).
package main

import (
	"fmt"
	"os"

	"github.com/compact-host/compact-host/host/internal/tokens/bpe/internal/vocab"
)

func main() {
	for _, e := range vocab.Encodings {
		data, err := vocab.Build(e.Name)
		if err == nil {
			err = os.WriteFile(e.File, data, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "genvocab:", err)
			os.Exit(1)
		}
	}
}
