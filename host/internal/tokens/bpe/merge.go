package bpe

// scanMax is the longest piece merged by mergeScan, on the stack; longer
// pieces (runs of spaces, base64) go to mergeHeap, which stays
// O(n log n) where the scan is O(n²).
const scanMax = 128

// pieceCount returns the number of tokens of one piece of the split. A
// piece that is a token is one, whatever its merges would give.
func (v *table) pieceCount(p string) int {
	if len(p) == 1 || v.rank(p) != noRank {
		return 1
	}
	if len(p) <= scanMax {
		return v.mergeScan(p)
	}
	return v.mergeHeap(p)
}

type part struct {
	start uint32
	rank  uint32 // rank of the token this part and the next one make, or noRank
}

// mergeScan merges the pair of adjacent parts with the lowest rank, the
// leftmost of equals, until no pair is a token, finding it by a scan: it
// is tiktoken's byte_pair_merge. It returns the number of parts left.
func (v *table) mergeScan(p string) int {
	var buf [scanMax + 1]part
	parts := buf[:len(p)+1]
	for i := range parts {
		parts[i] = part{uint32(i), noRank}
	}
	for i := 0; i+2 <= len(p); i++ {
		parts[i].rank = v.rank(p[i : i+2])
	}
	// pair is the rank of parts i and i+1 joined; i+2 < len(parts).
	pair := func(i int) uint32 {
		if i+3 >= len(parts) {
			return noRank
		}
		return v.rank(p[parts[i].start:parts[i+3].start])
	}
	for len(parts) > 2 {
		m, best := 0, noRank
		for i, pt := range parts[:len(parts)-2] {
			if pt.rank < best {
				m, best = i, pt.rank
			}
		}
		if best == noRank {
			break
		}
		parts[m].rank = pair(m)
		if m > 0 {
			parts[m-1].rank = v.rank(p[parts[m-1].start:parts[m+2].start])
		}
		parts = append(parts[:m+1], parts[m+2:]...)
	}
	return len(parts) - 1
}

// mergeHeap makes the same merges as mergeScan with the parts in a linked
// list and the candidate pairs in a min-heap of rank<<32|start, so that
// equal ranks pop leftmost first. A candidate whose part has since
// changed is stale and skipped: a part's pair only grows, so its rank
// never comes back to an old value.
func (v *table) mergeHeap(p string) int {
	n := int32(len(p))
	next := make([]int32, n)
	prev := make([]int32, n+1)
	rank := make([]uint32, n)
	h := make(candidates, 0, n)
	for i := range n {
		next[i], prev[i] = i+1, i-1
	}
	prev[n] = n - 1
	// pair is the rank of the part at i joined with the next one.
	pair := func(i int32) uint32 {
		j := next[i]
		if j >= n {
			return noRank
		}
		return v.rank(p[i:next[j]])
	}
	for i := range n {
		rank[i] = pair(i)
		if rank[i] != noRank {
			h = append(h, uint64(rank[i])<<32|uint64(i))
		}
	}
	h.init()
	parts := int(n)
	for len(h) > 0 {
		c := h.pop()
		i := int32(uint32(c))
		if rank[i] != uint32(c>>32) {
			continue
		}
		j := next[i]
		k := next[j]
		next[i], prev[k] = k, i
		rank[j] = noRank
		parts--
		for _, b := range [2]int32{i, prev[i]} {
			if b < 0 {
				continue
			}
			if rank[b] = pair(b); rank[b] != noRank {
				h.push(uint64(rank[b])<<32 | uint64(b))
			}
		}
	}
	return parts
}

// candidates is a binary min-heap.
type candidates []uint64

func (h candidates) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *candidates) push(c uint64) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		up := (i - 1) / 2
		if s[up] <= s[i] {
			break
		}
		s[up], s[i] = s[i], s[up]
		i = up
	}
}

func (h *candidates) pop() uint64 {
	s := *h
	top := s[0]
	s[0] = s[len(s)-1]
	*h = s[:len(s)-1]
	h.down(0)
	return top
}

func (h candidates) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1] < h[c] {
			c++
		}
		if h[i] <= h[c] {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
