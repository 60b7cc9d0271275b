// Package bpe counts the tokens of OpenAI's o200k_base and cl100k_base
// encodings, exactly as tiktoken does: the text is split into pieces by
// the encoding's pattern, and each piece that is not a token is merged
// byte pair by byte pair, lowest rank first.
//
// The vocabularies are embedded as the tokens' bytes in rank order
// (o200k_base.tok, cl100k_base.tok, written by `go generate` from
// github.com/tiktoken-go/tokenizer); the lookup table is built on first
// use. Special tokens such as <|endoftext|> are counted as the ordinary
// text they are made of, as tiktoken's encode_ordinary counts them.
package bpe

import (
	_ "embed"
	"sync"
)

//go:generate go run ./internal/vocab/genvocab

//go:embed o200k_base.tok
var o200kData string

//go:embed cl100k_base.tok
var cl100kData string

// Encoding is one tokenizer. Its methods are safe for concurrent use.
type Encoding struct {
	name  string
	data  string
	split func(s string, i int) int
	once  sync.Once
	table table
}

var (
	o200k  = &Encoding{name: "o200k_base", data: o200kData, split: splitO200k}
	cl100k = &Encoding{name: "cl100k_base", data: cl100kData, split: splitCl100k}
)

// O200k returns the o200k_base encoding (GPT-4o, GPT-4.1, GPT-5, o-series).
func O200k() *Encoding { return o200k }

// Cl100k returns the cl100k_base encoding (GPT-4, GPT-3.5).
func Cl100k() *Encoding { return cl100k }

// Name is the encoding's name in tiktoken: "o200k_base" or "cl100k_base".
func (e *Encoding) Name() string { return e.name }

func (e *Encoding) load() *table {
	e.once.Do(func() { e.table.init(e.data) })
	return &e.table
}

// Count returns the number of tokens of s. Bytes that are not valid UTF-8
// split the text as U+FFFD would and are merged as the bytes they are, as
// in tiktoken-go.
func (e *Encoding) Count(s string) int {
	v := e.load()
	n := 0
	for i := 0; i < len(s); {
		j := e.split(s, i)
		n += v.pieceCount(s[i:j])
		i = j
	}
	return n
}
