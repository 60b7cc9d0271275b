package host

import "github.com/compact-host/compact-host/host/internal/msgcheck"

// ValidationError says which message breaks the providers' rules and how.
type ValidationError = msgcheck.Error

// Validate checks msgs against the rules providers enforce on a request
// (see host/formats.Validate, which applies the same rules to imports),
// and also that the first non-system message is from the user. With
// pendingTail, calls of a final assistant message may still wait for
// their results (the agent is running them).
func Validate(msgs []Message, pendingTail bool) error {
	return msgcheck.Check(msgs, msgcheck.Options{PendingTail: pendingTail, UserFirst: true})
}
