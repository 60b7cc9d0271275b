// Package vocab writes the vocabularies package bpe embeds, from the
// tables of github.com/tiktoken-go/tokenizer. Only the generator and the
// tests import it, so the engine never links those tables.
package vocab

import (
	"bytes"
	"fmt"

	"github.com/tiktoken-go/tokenizer"
)

// Encodings names the encodings package bpe embeds, with the file each is
// written to.
var Encodings = []struct {
	Name tokenizer.Encoding
	File string
}{
	{tokenizer.O200kBase, "o200k_base.tok"},
	{tokenizer.Cl100kBase, "cl100k_base.tok"},
}

// maxRank bounds the search for the last rank: both encodings have fewer
// than 2^18 ordinary tokens.
const maxRank = 1 << 18

// Build returns the vocabulary of an encoding in bpe's format: for each
// rank from 0, one byte with the token's length (1 to 255) and the
// token's bytes. Ranks are dense, so a token's position is its rank.
// Special tokens are not part of it: the tokenizer's Count treats
// their text as ordinary text, and so does bpe.
func Build(enc tokenizer.Encoding) ([]byte, error) {
	codec, err := tokenizer.Get(enc)
	if err != nil {
		return nil, fmt.Errorf("vocab: %s: %w", enc, err)
	}
	// Decode returns a rank's bytes unchanged and fails for a rank that
	// is not a token.
	codec.SetErrorMode(tokenizer.ErrorModeNone)
	var tokens []string
	for r := range maxRank {
		tok, err := codec.Decode([]uint{uint(r)})
		if err != nil {
			break
		}
		tokens = append(tokens, tok)
	}
	for r := len(tokens); r < maxRank; r++ {
		if _, err := codec.Decode([]uint{uint(r)}); err == nil {
			return nil, fmt.Errorf("vocab: %s: rank %d is a token but rank %d is not: ranks are not dense", enc, r, len(tokens))
		}
	}
	if len(tokens) < 256 {
		return nil, fmt.Errorf("vocab: %s: only %d tokens", enc, len(tokens))
	}
	var b bytes.Buffer
	for r, tok := range tokens {
		if len(tok) == 0 || len(tok) > 255 {
			return nil, fmt.Errorf("vocab: %s: token %d is %d bytes long, not 1 to 255", enc, r, len(tok))
		}
		b.WriteByte(byte(len(tok)))
		b.WriteString(tok)
	}
	return b.Bytes(), nil
}
