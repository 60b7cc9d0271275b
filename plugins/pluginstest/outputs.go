package pluginstest

import (
	"fmt"
)

// The generators below write deterministic tool outputs of about size
// bytes (whole lines, so a little more), for truncator tests and
// benchmarks.

// ShellOutput looks like a build log: numbered steps, a warning now and
// then, and a failure summary at the end.
func ShellOutput(size int) []byte {
	return lines(size, func(i int) string {
		if i%97 == 0 {
			return fmt.Sprintf("warning: pkg/module%03d/file%d.go:%d: unused variable 'tmp%d'", i%200, i%13, i%500+1, i)
		}
		return fmt.Sprintf("[%6d] compiling pkg/module%03d (step %d of many) ok in %d.%03ds", i, i%200, i, i%7, i%1000)
	}, "FAIL: 3 steps failed, see above\nexit status 1\n")
}

// GrepOutput looks like search results: path:line:match.
func GrepOutput(size int) []byte {
	return lines(size, func(i int) string {
		return fmt.Sprintf("internal/service%02d/handler_%d.go:%d:\tif err := validate(req%d); err != nil {", i%50, i%9, i*7%2000+1, i)
	}, "")
}

// FileOutput looks like a source file read with line numbers, with
// multi-byte text in its comments.
func FileOutput(size int) []byte {
	return lines(size, func(i int) string {
		if i%10 == 0 {
			return fmt.Sprintf("%6d\t// Größe %d: 計算 — étape suivante", i+1, i)
		}
		return fmt.Sprintf("%6d\tfunc step%d(x int) int { return x*%d + %d }", i+1, i, i%17, i%31)
	}, "")
}

func lines(size int, line func(int) string, trailer string) []byte {
	out := make([]byte, 0, size+len(trailer)+128)
	for i := 0; len(out) < size; i++ {
		out = append(out, line(i)...)
		out = append(out, '\n')
	}
	return append(out, trailer...)
}
