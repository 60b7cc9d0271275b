package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What go test -json printed for a package with a passing, a skipped and
// a failing test, a subtest skipped with t.Log before its t.Skip, and a
// package whose build failed.
const stream = `{"Action":"start","Package":"example/a"}
{"Action":"run","Package":"example/a","Test":"TestPass"}
{"Action":"output","Package":"example/a","Test":"TestPass","Output":"=== RUN   TestPass\n"}
{"Action":"output","Package":"example/a","Test":"TestPass","Output":"--- PASS: TestPass (0.00s)\n"}
{"Action":"pass","Package":"example/a","Test":"TestPass","Elapsed":0}
{"Action":"run","Package":"example/a","Test":"TestRedis"}
{"Action":"output","Package":"example/a","Test":"TestRedis","Output":"=== RUN   TestRedis\n"}
{"Action":"output","Package":"example/a","Test":"TestRedis","Output":"    redis_test.go:12: redis-server is not installed (apt-get install -y redis-server)\n"}
{"Action":"output","Package":"example/a","Test":"TestRedis","Output":"--- SKIP: TestRedis (0.00s)\n"}
{"Action":"skip","Package":"example/a","Test":"TestRedis","Elapsed":0}
{"Action":"run","Package":"example/a","Test":"TestNode"}
{"Action":"run","Package":"example/a","Test":"TestNode/sdk"}
{"Action":"output","Package":"example/a","Test":"TestNode/sdk","Output":"=== RUN   TestNode/sdk\n"}
{"Action":"output","Package":"example/a","Test":"TestNode/sdk","Output":"    node_test.go:20: no node_modules\n"}
{"Action":"output","Package":"example/a","Test":"TestNode/sdk","Output":"    node_test.go:21: run npm ci in testdata/node\n"}
{"Action":"output","Package":"example/a","Test":"TestNode/sdk","Output":"    --- SKIP: TestNode/sdk (0.00s)\n"}
{"Action":"skip","Package":"example/a","Test":"TestNode/sdk","Elapsed":0}
{"Action":"output","Package":"example/a","Test":"TestNode","Output":"--- PASS: TestNode (0.00s)\n"}
{"Action":"pass","Package":"example/a","Test":"TestNode","Elapsed":0}
{"Action":"run","Package":"example/a","Test":"TestFail"}
{"Action":"output","Package":"example/a","Test":"TestFail","Output":"=== RUN   TestFail\n"}
{"Action":"output","Package":"example/a","Test":"TestFail","Output":"    a_test.go:30: want 2, got 3\n"}
{"Action":"output","Package":"example/a","Test":"TestFail","Output":"--- FAIL: TestFail (0.00s)\n"}
{"Action":"fail","Package":"example/a","Test":"TestFail","Elapsed":0}
{"Action":"output","Package":"example/a","Output":"FAIL\n"}
{"Action":"output","Package":"example/a","Output":"FAIL\texample/a\t0.010s\n"}
{"Action":"fail","Package":"example/a","Elapsed":0.01}
{"Action":"output","Package":"example/b","Test":"TestOK","Output":"--- PASS: TestOK (0.00s)\n"}
{"Action":"pass","Package":"example/b","Test":"TestOK","Elapsed":0}
{"Action":"output","Package":"example/b","Output":"PASS\n"}
{"Action":"output","Package":"example/b","Output":"ok  \texample/b\t0.004s\n"}
{"Action":"pass","Package":"example/b","Elapsed":0.004}
{"ImportPath":"example/c","Action":"build-output","Output":"c/c.go:3:1: syntax error: non-declaration statement outside function body\n"}
{"ImportPath":"example/c","Action":"build-fail"}
{"Action":"start","Package":"example/c"}
{"Action":"output","Package":"example/c","Output":"FAIL\texample/c [build failed]\n"}
{"Action":"fail","Package":"example/c","Elapsed":0,"FailedBuild":"example/c"}
`

func TestSummaryPrintsFailuresSkipsAndATally(t *testing.T) {
	var out bytes.Buffer
	s := newSummary(&out)
	require.NoError(t, s.read(strings.NewReader(stream)))
	s.finish()
	got := out.String()

	assert.Contains(t, got, "    a_test.go:30: want 2, got 3\n--- FAIL: TestFail (0.00s)\n", "a failed test's output")
	assert.Contains(t, got, "FAIL\texample/a\t0.010s\n")
	assert.Contains(t, got, "ok  \texample/b\t0.004s\n")
	assert.Contains(t, got, "c/c.go:3:1: syntax error", "the build error")
	assert.NotContains(t, got, "TestPass", "a passing test is quiet, as go test without -v")
	assert.NotContains(t, got, "=== RUN")
	assert.NotContains(t, got, "PASS\n", "go test without -v prints no PASS line")

	assert.Contains(t, got, "Skipped (2):\n"+
		"  example/a TestNode/sdk: node_test.go:20: no node_modules / node_test.go:21: run npm ci in testdata/node\n"+
		"  example/a TestRedis: redis_test.go:12: redis-server is not installed (apt-get install -y redis-server)\n")
	assert.Contains(t, got, "Failed without a failed test (a build error, a panic outside a test, a timeout):\n  example/c\n")
	assert.True(t, strings.HasSuffix(got, "\n3 passed, 2 failed, 2 skipped\n"), "the last line is the tally:\n%s", got)
}

// A test still running when its package died (a panic in another
// goroutine, the -timeout) has its output printed.
func TestSummaryPrintsTheOutputOfTestsCutShort(t *testing.T) {
	var out bytes.Buffer
	s := newSummary(&out)
	require.NoError(t, s.read(strings.NewReader(`{"Action":"run","Package":"p","Test":"TestHang"}
{"Action":"output","Package":"p","Test":"TestHang","Output":"=== RUN   TestHang\n"}
{"Action":"output","Package":"p","Test":"TestHang","Output":"    hang_test.go:9: waiting\n"}
{"Action":"output","Package":"p","Output":"panic: test timed out after 10m0s\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t600.1s\n"}
{"Action":"fail","Package":"p","Elapsed":600.1}
`)))
	s.finish()
	assert.Contains(t, out.String(), "panic: test timed out after 10m0s\n")
	assert.Contains(t, out.String(), "    hang_test.go:9: waiting\n")
	assert.True(t, strings.HasSuffix(out.String(), "\n0 passed, 1 failed, 0 skipped\n"), out.String())
}

// A line too long for an event is an error, not a silent cut.
func TestSummaryRefusesAnOverlongLine(t *testing.T) {
	s := newSummary(&bytes.Buffer{})
	err := s.read(strings.NewReader(strings.Repeat("x", maxLine+1) + "\n"))
	assert.Error(t, err)
}
