package abi

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// Frame layout (all integers little-endian u32):
//
//	magic   "CHF" + byte(Major)
//	hlen    length of the header
//	header  hlen bytes of UTF-8 JSON
//	nblobs  number of blobs
//	nblobs × (blen, blen bytes)
//
// The header refers to blob i by the JSON number i. See abi/README.md.

// MaxFrameSize bounds any frame the host or the SDK will decode.
const MaxFrameSize = 1 << 30

var frameMagic = [4]byte{'C', 'H', 'F', byte(Major)}

// frameWriter writes a frame's header and collects its blobs.
type frameWriter struct {
	jsonWriter
	blobs [][]byte
}

// ref writes a blob reference to b, or nothing for empty content: an
// absent reference means empty.
func (w *frameWriter) ref(k string, b []byte) {
	if len(b) == 0 {
		return
	}
	w.int(k, len(w.blobs))
	w.blobs = append(w.blobs, b)
}

// refStr is ref for a string. The blob only reads the string's bytes until
// finish copies them into the frame, so it views them without a copy.
func (w *frameWriter) refStr(k, s string) {
	w.ref(k, unsafe.Slice(unsafe.StringData(s), len(s)))
}

// finish lays out the frame around the header written so far.
func (w *frameWriter) finish() []byte {
	size := 4 + 4 + len(w.b) + 4
	for _, b := range w.blobs {
		size += 4 + len(b)
	}
	out := make([]byte, 0, size)
	out = append(out, frameMagic[:]...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(w.b)))
	out = append(out, w.b...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(w.blobs)))
	for _, b := range w.blobs {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(b)))
		out = append(out, b...)
	}
	return out
}

// frameReader resolves blob references of a decoded frame. Blobs alias the
// frame's bytes.
type frameReader struct {
	header   []byte
	blobs    [][]byte
	blobsBuf [4][]byte // room for a small frame's blobs without allocating
}

// readFrame checks the frame's layout and fills r with its parts.
func readFrame(b []byte, r *frameReader) error {
	if len(b) > MaxFrameSize {
		return fmt.Errorf("%w: %d bytes is over the %d byte limit", ErrMalformed, len(b), MaxFrameSize)
	}
	if len(b) < 12 {
		return fmt.Errorf("%w: %d bytes is shorter than the smallest frame", ErrMalformed, len(b))
	}
	if [4]byte(b[:4]) != frameMagic {
		if b[0] == 'C' && b[1] == 'H' && b[2] == 'F' {
			return fmt.Errorf("%w: frame is ABI v%d, host speaks v%d", ErrMalformed, b[3], Major)
		}
		return fmt.Errorf("%w: bad magic %q", ErrMalformed, b[:4])
	}
	rest := b[4:]
	hlen := binary.LittleEndian.Uint32(rest)
	rest = rest[4:]
	if uint64(hlen) > uint64(len(rest)) {
		return fmt.Errorf("%w: header length %d runs past the frame end", ErrMalformed, hlen)
	}
	r.header = rest[:hlen]
	rest = rest[hlen:]
	if len(rest) < 4 {
		return fmt.Errorf("%w: missing blob count", ErrMalformed)
	}
	n := binary.LittleEndian.Uint32(rest)
	rest = rest[4:]
	if uint64(n)*4 > uint64(len(rest)) {
		return fmt.Errorf("%w: %d blobs cannot fit in %d bytes", ErrMalformed, n, len(rest))
	}
	r.blobs = r.blobsBuf[:0]
	if n > uint32(len(r.blobsBuf)) {
		r.blobs = make([][]byte, 0, n)
	}
	for i := uint32(0); i < n; i++ {
		if len(rest) < 4 {
			return fmt.Errorf("%w: blob %d has no length", ErrMalformed, i)
		}
		l := binary.LittleEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(l) > uint64(len(rest)) {
			return fmt.Errorf("%w: blob %d length %d runs past the frame end", ErrMalformed, i, l)
		}
		r.blobs = append(r.blobs, rest[:l:l])
		rest = rest[l:]
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(rest))
	}
	return nil
}

// blob resolves a reference read by jsonReader.ref: -1 is empty.
func (r *frameReader) blob(ref int) ([]byte, error) {
	if ref < 0 {
		return nil, nil
	}
	if ref >= len(r.blobs) {
		return nil, fmt.Errorf("blob reference %d out of range (frame has %d)", ref, len(r.blobs))
	}
	return r.blobs[ref], nil
}
