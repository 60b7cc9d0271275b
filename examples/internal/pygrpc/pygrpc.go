// Package pygrpc lets the tests of the Python SDK's examples find out
// whether the Python they run under can serve gRPC.
package pygrpc

import (
	"os"
	"os/exec"
	"testing"
)

// Python is the interpreter the examples' scripts name (#!): Debian's, whose
// python3-grpcio .ci/run installs.
const Python = "/usr/bin/python3"

// Require skips the test, saying what to install, when Python cannot
// import grpc; under CI (CI=true), which installs it, that is a failure,
// as for the Redis tests.
func Require(tb testing.TB) {
	tb.Helper()
	out, err := exec.Command(Python, "-c", "import grpc").CombinedOutput()
	if err == nil {
		return
	}
	missing := tb.Skipf
	if os.Getenv("CI") == "true" {
		missing = tb.Fatalf
	}
	missing("%s cannot import grpc (apt-get install -y python3-grpcio): %v\n%s", Python, err, out)
}
