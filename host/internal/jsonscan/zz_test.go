package jsonscan

import (
	"strings"
	"testing"
)

var zzPlain = []byte(`"` + strings.Repeat("func main() { fmt.Println(hello, world) } // comment ", 20000) + `"`)
var zzEsc = []byte(`"` + strings.Repeat(`with open('django/db/x.py', 'r') as f:\n    content = f.read()\n    print(\"x\")\n`, 10000) + `"`)

func BenchmarkZZPlain(b *testing.B) {
	for b.Loop() {
		String(zzPlain, 0)
	}
}
func BenchmarkZZEsc(b *testing.B) {
	for b.Loop() {
		String(zzEsc, 0)
	}
}
