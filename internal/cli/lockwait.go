package cli

import (
	"context"
	"fmt"
	"os"
	"time"
)

// defaultLockWait bounds the wait for a session file's lock unless
// --lock-wait says otherwise: an agent holds it for an append, so a lock
// held this long is an agent at work on the file.
const defaultLockWait = 10 * time.Second

// lockNoticeDelay is how long a wait for a lock stays silent: most locks
// are held for an append, a few milliseconds.
const lockNoticeDelay = 500 * time.Millisecond

// lockPoll is how often a held lock is tried again.
const lockPoll = 50 * time.Millisecond

// waitForLock waits, at most bound, until no other program holds the
// exclusive lock of the session file at path, the lock its writers take
// (compact-host's session logs, and the append of a write-back). After
// lockNoticeDelay it says on stderr what it waits for, and who holds it
// where the system tells. Past bound it fails with ExitBusy; SIGINT or
// SIGTERM stop it. The lock is released at once: the write takes it
// again, so this only makes a long wait visible and bounded.
func (a *app) waitForLock(ctx context.Context, path string, bound time.Duration) error {
	f, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil // reading the file reports it
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	began := time.Now()
	noticed := false
	tick := time.NewTicker(lockPoll)
	defer tick.Stop()
	for {
		ok, err := tryFileLock(f)
		if err != nil {
			return nil // no locks here: the write finds out
		}
		if ok {
			unlockFile(f)
			return nil
		}
		waited := time.Since(began)
		if !noticed && waited >= lockNoticeDelay {
			noticed = true
			a.note("note: waiting for the lock on %s held by %s; Ctrl-C to stop (at most %s, --lock-wait)", path, lockHolder(f), bound)
		}
		if waited >= bound {
			return withCode(ExitBusy, fmt.Errorf("%s: %s held its lock for more than %s (--lock-wait); nothing was written: close the agent, or run again when it is idle",
				path, lockHolder(f), bound))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the lock on %s: %w", path, ctx.Err())
		case <-tick.C:
		}
	}
}
