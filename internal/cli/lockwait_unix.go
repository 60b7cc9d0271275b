//go:build unix

package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

const openNonblock = syscall.O_NONBLOCK

// tryFileLock takes flock(LOCK_EX) on f without waiting, as the session
// log's writers do.
func tryFileLock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case !errors.Is(err, syscall.EINTR):
			return false, err
		}
	}
}

func unlockFile(f *os.File) { syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// maxProcLocks bounds what is read of /proc/locks.
const maxProcLocks = 1 << 20

// lockHolder names the process holding f's lock, "NAME (pid N)", from
// /proc/locks where there is one; else "another program".
func lockHolder(f *os.File) string {
	const unknown = "another program"
	st, err := f.Stat()
	if err != nil {
		return unknown
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return unknown
	}
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return unknown
	}
	defer locks.Close()
	dev := uint64(sys.Dev)
	major, minor := (dev>>8)&0xfff|(dev>>32)&^0xfff, dev&0xff|(dev>>12)&^0xff
	want := fmt.Sprintf("%02x:%02x:%d", major, minor, sys.Ino)
	sc := bufio.NewScanner(io.LimitReader(locks, maxProcLocks))
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234567 0 EOF"
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[5] != want {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil || pid <= 0 {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if name := strings.TrimSpace(string(comm)); err == nil && name != "" {
			return fmt.Sprintf("%s (pid %d)", name, pid)
		}
		return fmt.Sprintf("process %d", pid)
	}
	return unknown
}
