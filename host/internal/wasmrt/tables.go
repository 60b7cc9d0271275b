package wasmrt

import (
	"errors"
	"fmt"
)

// maxTableElements bounds the initial size of a module's tables. wazero
// allocates a table's elements in host memory at instantiation, outside
// the linear-memory limit: a module declaring a table of 2^27 entries
// would take 1 GiB of the host's memory per instance. A Go-built plugin
// declares a few thousand.
const maxTableElements = 1 << 20

// checkTables reads the table section of a wasm binary and refuses tables
// whose initial size is over maxTableElements. The binary has already been
// compiled, so it is well formed; the parser still checks every length.
func checkTables(bin []byte) error {
	if len(bin) < 8 {
		return errors.New("too short")
	}
	p := bin[8:]
	for len(p) > 0 {
		id := p[0]
		size, n := uleb(p[1:])
		if n == 0 || uint64(len(p)-1-n) < size {
			return errors.New("section runs past the end")
		}
		payload := p[1+n : 1+n+int(size)]
		p = p[1+n+int(size):]
		if id != 4 { // the table section
			continue
		}
		count, n := uleb(payload)
		payload = payload[n:]
		for i := uint64(0); i < count; i++ {
			if len(payload) < 2 {
				return errors.New("table entry runs past the section")
			}
			// reftype, then limits: a flag byte (bit 0: max present,
			// bit 2: 64-bit) and the minimum.
			flags := payload[1]
			min, n := uleb(payload[2:])
			if n == 0 {
				return errors.New("table limits run past the section")
			}
			if flags&0x04 != 0 || min > maxTableElements {
				return fmt.Errorf("table %d starts with %d elements, over the limit of %d", i, min, maxTableElements)
			}
			payload = payload[2+n:]
			if flags&0x01 != 0 {
				if _, n = uleb(payload); n == 0 {
					return errors.New("table limits run past the section")
				}
				payload = payload[n:]
			}
		}
	}
	return nil
}

// uleb decodes an unsigned LEB128 number, returning it and the bytes it
// took, or 0 bytes when it is truncated or longer than 64 bits.
func uleb(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}
