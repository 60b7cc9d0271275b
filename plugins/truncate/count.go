package truncate

import (
	"encoding/binary"
	"math/bits"
)

// countByteSWAR counts the bytes of b equal to c eight at a time, with
// word arithmetic. bytes.Count is vectorized on the common CPUs but a byte
// loop in a wasm build, where this is several times faster; countLines
// picks the one of its build.
func countByteSWAR(b []byte, c byte) int {
	const (
		ones = 0x0101010101010101
		low7 = 0x7f7f7f7f7f7f7f7f
	)
	pattern := ones * uint64(c)
	n, i := 0, 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:]) ^ pattern // zero where b has c
		// The high bit of each byte of y is set when that byte of x is zero.
		y := ^((x&low7 + low7) | x | low7)
		n += bits.OnesCount64(y)
	}
	for ; i < len(b); i++ {
		if b[i] == c {
			n++
		}
	}
	return n
}
