package host

import "sort"

// cutAt reports whether the history may be cut before msgs[i]: no tool call
// before i still waits for its result. i == len(msgs) is valid when no call
// is open at the end.
func (s *Session) cutAt(i int) bool {
	if i == len(s.msgs) {
		return len(s.open) == 0
	}
	return s.cutOK[i]
}

// findCut returns the index of the first message to keep so that at least
// keep tokens and minKeep messages stay verbatim, moved back (keeping more)
// to the nearest valid cut, or forward if there is none. It returns start
// when nothing can be folded.
func (s *Session) findCut(start, keep, minKeep int) int {
	n := len(s.msgs)
	total := s.cum[n]
	// The largest i with kept tokens >= keep: binary search on the
	// monotone prefix sums.
	i := sort.Search(n+1, func(i int) bool { return total-s.cum[i] < keep }) - 1
	if i < start {
		return start
	}
	i = min(i, n-minKeep)
	for j := i; j > start; j-- {
		if s.cutAt(j) {
			return j
		}
	}
	for j := max(i+1, start+1); j <= n; j++ {
		if s.cutAt(j) {
			return j
		}
	}
	return start
}

// turnStart is the index of the user request that opened the turn holding
// msgs[cut], or -1. A cut at a request is at a turn boundary.
func (s *Session) turnStart(cut int) int {
	k := sort.SearchInts(s.requests, cut) // first request >= cut
	if k < len(s.requests) && s.requests[k] == cut {
		return cut
	}
	if k == 0 {
		return -1
	}
	return s.requests[k-1]
}

// protectFrom is the first message index inside the newest protect tokens.
func (s *Session) protectFrom(protect int) int {
	n := len(s.msgs)
	total := s.cum[n]
	return sort.Search(n+1, func(i int) bool { return total-s.cum[i] < protect })
}
