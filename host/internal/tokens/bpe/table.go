package bpe

import (
	"fmt"
	"hash/maphash"
	"math/bits"
)

// table maps a token's bytes to its rank with open addressing. A slot
// packs the upper bits of the token's hash, where the token starts in
// data and its rank plus one (0 is an empty slot): a miss is decided
// from the slot alone, a hit reads the token once. At under 40% load a
// lookup reads one or two slots.
type table struct {
	data    string // the embedded file: a length byte, then the token
	slots   []uint64
	mask    uint64
	seed    maphash.Seed
	offBits uint // slot bits [rankBits, rankBits+offBits) are the offset
	keyBits uint // slot bits from rankBits+offBits are the hash's top
	rankMax uint64
}

const noRank = ^uint32(0)

func (t *table) init(data string) {
	n := 0
	for i := 0; i < len(data); i += 1 + int(data[i]) {
		n++
	}
	t.data = data
	size := 1 << bits.Len(uint(n)*2)
	t.slots = make([]uint64, size)
	t.mask = uint64(size - 1)
	t.seed = maphash.MakeSeed()
	t.rankMax = 1<<bits.Len(uint(n)) - 1
	t.offBits = uint(bits.Len(uint(len(data))))
	t.keyBits = 64 - uint(bits.Len64(t.rankMax)) - t.offBits
	if t.keyBits < 16 {
		panic(fmt.Sprintf("bpe: %d tokens in %d bytes leave %d bits of hash in a slot", n, len(data), t.keyBits))
	}
	// Slots are filled in the order of their home slot, a block at a
	// time, so the writes stay in cache: taken in rank order they land
	// at random in a table of megabytes. Linear probing does not care
	// about the order of insertion.
	const blockBits = 11
	hashes := make([]uint64, n)
	offsets := make([]uint32, n)
	blocks := make([]int32, size>>blockBits+1)
	r := 0
	for i := 0; i < len(data); i += 1 + int(data[i]) {
		h := maphash.String(t.seed, data[i+1:i+1+int(data[i])])
		hashes[r], offsets[r] = h, uint32(i+1)
		blocks[(h&t.mask)>>blockBits+1]++
		r++
	}
	for b := 1; b < len(blocks); b++ {
		blocks[b] += blocks[b-1]
	}
	order := make([]int32, n)
	for r, h := range hashes {
		b := (h & t.mask) >> blockBits
		order[blocks[b]] = int32(r)
		blocks[b]++
	}
	rankBits := uint(bits.Len64(t.rankMax))
	for _, r := range order {
		h := hashes[r]
		for k := h & t.mask; ; k = (k + 1) & t.mask {
			if t.slots[k] == 0 {
				t.slots[k] = h>>(64-t.keyBits)<<(64-t.keyBits) | uint64(offsets[r])<<rankBits | uint64(r+1)
				break
			}
		}
	}
}

// rank returns the rank of tok, or noRank if tok is not a token.
func (t *table) rank(tok string) uint32 {
	if len(tok) > 255 {
		return noRank
	}
	h := maphash.String(t.seed, tok)
	key := h >> (64 - t.keyBits)
	rankBits := 64 - t.keyBits - t.offBits
	for k := h & t.mask; ; k = (k + 1) & t.mask {
		s := t.slots[k]
		if s == 0 {
			return noRank
		}
		if s>>(64-t.keyBits) == key {
			i := s >> rankBits & (1<<t.offBits - 1)
			if int(t.data[i-1]) == len(tok) && t.data[i:i+uint64(len(tok))] == tok {
				return uint32(s&t.rankMax) - 1
			}
		}
	}
}
