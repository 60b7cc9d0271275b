package heredoc

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStrip(t *testing.T) {
	for _, c := range []struct{ cmd, want string }{
		{"cd /t && cat > r.py << 'EOF'\nimport os\nsed -i x y.go\nEOF\npython r.py", "cd /t && cat > r.py << 'EOF'\npython r.py"},
		{"cat <<A <<B\na\nA\nb\nB\nhead x.go", "cat <<A <<B\nhead x.go"},
		{"cat <<A <<B\na\nA\nb\nhead x.go", "cat <<A <<B\nb\nhead x.go"}, // B has no terminator
		{"cat <<-EOF\n\tx\n\t\tEOF\nhead y.go", "cat <<-EOF\nhead y.go"},
		{"cat <<EOF\n\tx\n\tEOF\nEOF\nhead y.go", "cat <<EOF\nhead y.go"}, // tabs only with <<-
		{"cat <<\\E\"N\"D >out\nx\nEND\nnl a.go", "cat <<\\E\"N\"D >out\nnl a.go"},
		{"x=$((1<<2))\necho 2", "x=$((1<<2))\necho 2"},
		{"cat <<< word\nword\nhead a.go", "cat <<< word\nword\nhead a.go"},
		{"cat <<EOF\nx\nEOF", "cat <<EOF\n"},
		{"no here-document", "no here-document"},
	} {
		assert.Equal(t, c.want, Strip(c.cmd), "%q", c.cmd)
	}
}

// refStrip is Strip written line by line, as the package comment states
// the rules: each kept line keeps its newline, if it had one.
func refStrip(cmd string) string {
	if !strings.Contains(cmd, "<<") {
		return cmd
	}
	lines := strings.Split(cmd, "\n")
	var out strings.Builder
	misses := 0
	for i := 0; i < len(lines); i++ {
		out.WriteString(lines[i])
		if i < len(lines)-1 {
			out.WriteString("\n")
		}
		if misses >= MaxMisses {
			continue
		}
		for _, h := range refOps(lines[i]) {
			j := i + 1
			for j < len(lines) && lines[j] != h.delim && !(h.tabs && strings.TrimLeft(lines[j], "\t") == h.delim) {
				j++
			}
			if j == len(lines) {
				misses++
				break
			}
			i = j
		}
	}
	return out.String()
}

type refOp struct {
	delim string
	tabs  bool
}

func refOps(line string) []refOp {
	var ops []refOp
	for k := 0; k < len(line); {
		if line[k] != '<' {
			k++
			continue
		}
		n := k
		for n < len(line) && line[n] == '<' {
			n++
		}
		if n-k != 2 {
			k = n
			continue
		}
		op := refOp{tabs: n < len(line) && line[n] == '-'}
		if op.tabs {
			n++
		}
		for n < len(line) && (line[n] == ' ' || line[n] == '\t') {
			n++
		}
		w := n
		for n < len(line) && !strings.ContainsRune(" \t;|&<>()", rune(line[n])) {
			n++
		}
		op.delim = strings.NewReplacer("'", "", `"`, "", `\`, "").Replace(line[w:n])
		if op.delim != "" {
			ops = append(ops, op)
		}
		k = n
	}
	return ops
}

// A command of many lines, each with an operator whose terminator is
// missing, costs at most MaxMisses searches to its end, not one a line;
// once those are spent, a later body is read as commands.
func TestStripBoundsMissingTerminators(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 40000; i++ {
		b.WriteString("cat <<NOT_HERE_" + strings.Repeat("x", i%7) + "\n")
	}
	cmd := b.String()
	assert.Equal(t, cmd, Strip(cmd))
	misses := strings.Repeat("echo $((1<<2))\n", MaxMisses)
	assert.Equal(t, misses+"cat <<E\nx\nE\n", Strip(misses+"cat <<E\nx\nE\n"))
	assert.Equal(t, misses[15:]+"cat <<E\n", Strip(misses[15:]+"cat <<E\nx\nE\n"), "one miss fewer")
	assert.Equal(t, "cat <<E\n", Strip("cat <<E\nx\nE\n"))
}

func FuzzStrip(f *testing.F) {
	for _, c := range []string{"cat <<A <<B\na\nA\nb\nB\nx", "cat <<-E\n\tE\ny", "a<<b\nb", "<<<x\nx", "c <<E\nE", "c <<E\nx\nE\n", "<<-'a b'\na b\n"} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		assert.Equal(t, refStrip(cmd), Strip(cmd), "%q", cmd)
	})
}
