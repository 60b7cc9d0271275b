package truncate

import (
	"bytes"
	"testing"
)

func FuzzCountByteSWAR(f *testing.F) {
	f.Add([]byte("a\nb\n\n"), byte('\n'))
	f.Add(bytes.Repeat([]byte{0x80, '\n', 0, 0xff, 0x0a, 0x8a, 0x7f}, 50), byte('\n'))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, byte(0))
	f.Fuzz(func(t *testing.T, b []byte, c byte) {
		if got, want := countByteSWAR(b, c), bytes.Count(b, []byte{c}); got != want {
			t.Errorf("countByteSWAR(%q, %q) = %d, want %d", b, c, got, want)
		}
	})
}
