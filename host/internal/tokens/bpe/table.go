package bpe

import (
	"fmt"
	"math/bits"
)

// table maps a token's bytes to its rank with open addressing. A slot
// packs the top bits of the token's hash, where the token starts in data
// and its rank plus one (0 is an empty slot): a miss is decided from the
// slot alone, a hit reads the token once. At under 40% load a lookup
// reads one or two slots.
type table struct {
	data  string // the embedded file: a length byte, then the token
	slots []uint64
	mask  uint64
}

// The slot layout: rank+1 in the low bits, then the offset, then the
// top bits of the hash.
const (
	rankBits = 18 // o200k_base has 199,998 tokens
	offBits  = 22 // its file is 1.6 MB
	keyShift = rankBits + offBits
	rankMask = 1<<rankBits - 1
	offMask  = 1<<offBits - 1
	keyMask  = (1<<64 - 1) >> keyShift << keyShift
)

const noRank = ^uint32(0)

func (t *table) init(data string) {
	n := 0
	for i := 0; i < len(data); i += 1 + int(data[i]) {
		n++
	}
	if n >= rankMask || len(data) > offMask {
		panic(fmt.Sprintf("bpe: %d tokens in %d bytes do not fit a slot", n, len(data)))
	}
	size := 1 << bits.Len(uint(n)*2)
	slots, mask := make([]uint64, size), uint64(size-1)
	// Slots are filled in the order of their home slot, a block at a
	// time, so the writes stay in cache: taken in rank order they land
	// at random in a table of megabytes. Linear probing does not care
	// about the order of insertion.
	const blockBits = 11
	entries := make([]uint64, n) // the hash's top bits, offset, rank+1: a slot
	homes := make([]uint32, n)
	blocks := make([]int32, size>>blockBits+1)
	r := 0
	for i := 0; i < len(data); i += 1 + int(data[i]) {
		h := hash(data[i+1 : i+1+int(data[i])])
		entries[r] = h&keyMask | uint64(i+1)<<rankBits | uint64(r+1)
		homes[r] = uint32(h & mask)
		blocks[homes[r]>>blockBits+1]++
		r++
	}
	for b := 1; b < len(blocks); b++ {
		blocks[b] += blocks[b-1]
	}
	order := make([]int32, n)
	for r, home := range homes {
		b := home >> blockBits
		order[blocks[b]] = int32(r)
		blocks[b]++
	}
	for _, r := range order {
		k := uint64(homes[r])
		for slots[k] != 0 {
			k = (k + 1) & mask
		}
		slots[k] = entries[r]
	}
	t.data, t.slots, t.mask = data, slots, mask
}

// rank returns the rank of tok, or noRank if tok is not a token.
func (t *table) rank(tok string) uint32 {
	if len(tok) > 255 {
		return noRank
	}
	h := hash(tok)
	for k := h & t.mask; ; k = (k + 1) & t.mask {
		s := t.slots[k]
		if s == 0 {
			return noRank
		}
		if (s^h)&keyMask == 0 {
			i := s >> rankBits & offMask
			if int(t.data[i-1]) == len(tok) && t.data[i:i+uint64(len(tok))] == tok {
				return uint32(s&rankMask) - 1
			}
		}
	}
}

// hash is wyhash's mixing over loads that stay within s: tokens are
// short, and a call into the runtime's hash costs more than this. The
// table is never written after it is built, so a fixed hash cannot be
// flooded: the longest probe is the vocabulary's.
func hash(s string) uint64 {
	const (
		k0 = 0xa0761d6478bd642f
		k1 = 0xe7037ed1a0b428db
		k2 = 0x8ebc6af09c88c6e3
	)
	n := len(s)
	var a, b uint64
	h := uint64(n) ^ k0
	switch {
	case n > 16:
		// 16 bytes at a time, then the last 16 (which may overlap).
		for i := 0; i+16 < n; i += 16 {
			h = mix(load8(s[i:])^k1, load8(s[i+8:])^h)
		}
		a, b = load8(s[n-16:]), load8(s[n-8:])
	case n >= 8:
		a, b = load8(s), load8(s[n-8:])
	case n >= 4:
		a, b = uint64(load4(s)), uint64(load4(s[n-4:]))
	case n > 0:
		a = uint64(s[0])<<16 | uint64(s[n>>1])<<8 | uint64(s[n-1])
	}
	return mix(a^k1, b^h^k2)
}

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

func load8(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func load4(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}
