package bpe

import (
	"hash/maphash"
	"math/bits"
)

// table maps a token's bytes to its rank with open addressing: a slot
// holds the upper 32 bits of the token's hash and its rank plus one (0 is
// an empty slot), so most misses are decided without reading the token.
// At under 40% load a lookup reads one or two slots.
type table struct {
	data  string   // the embedded file: a length byte, then the token
	start []uint32 // start[r] is where token r begins in data
	slots []uint64
	mask  uint64
	seed  maphash.Seed
}

const noRank = ^uint32(0)

func (v *table) init(data string) {
	n := 0
	for i := 0; i < len(data); i += 1 + int(data[i]) {
		n++
	}
	v.data = data
	v.start = make([]uint32, n)
	size := 1 << bits.Len(uint(n)*2)
	v.slots = make([]uint64, size)
	v.mask = uint64(size - 1)
	v.seed = maphash.MakeSeed()
	r := 0
	for i := 0; i < len(data); i += 1 + int(data[i]) {
		v.start[r] = uint32(i + 1)
		tok := data[i+1 : i+1+int(data[i])]
		h := maphash.String(v.seed, tok)
		for k := h & v.mask; ; k = (k + 1) & v.mask {
			if v.slots[k] == 0 {
				v.slots[k] = h&^0xffffffff | uint64(r+1)
				break
			}
		}
		r++
	}
}

// token returns the bytes of rank r.
func (v *table) token(r uint32) string {
	i := v.start[r]
	return v.data[i : i+uint32(v.data[i-1])]
}

// rank returns the rank of tok, or noRank if tok is not a token.
func (v *table) rank(tok string) uint32 {
	if len(tok) > 255 {
		return noRank
	}
	h := maphash.String(v.seed, tok)
	for k := h & v.mask; ; k = (k + 1) & v.mask {
		s := v.slots[k]
		if s == 0 {
			return noRank
		}
		if s>>32 == h>>32 {
			r := uint32(s) - 1
			if v.token(r) == tok {
				return r
			}
		}
	}
}
