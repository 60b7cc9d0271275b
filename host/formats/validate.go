package formats

import (
	"github.com/compact-host/compact-host/abi"
	"github.com/compact-host/compact-host/host/internal/msgcheck"
)

// ValidationError reports the first message that breaks the canonical
// invariants checked by Validate.
type ValidationError = msgcheck.Error

// Validate checks the invariants every reader guarantees, the rules of
// msgcheck.Check: known roles and blocks, unique non-empty IDs, content in
// every message, and every tool_use answered exactly once by the user
// message(s) right after it, results first, none orphaned.
//
// It returns nil or a *ValidationError for the first problem.
func Validate(msgs []abi.Message) error {
	return msgcheck.Check(msgs, msgcheck.Options{})
}
