// Command nohandshake is a hostile process plugin: it starts, says so on
// stderr, and never writes the go-plugin handshake line. Given a path as
// its argument, it first writes its process ID there, so that a test can
// check it is gone once the host stops.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	if len(os.Args) > 1 {
		// Renamed into place, so that a reader never sees part of it.
		tmp := os.Args[1] + ".tmp"
		if err := os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "nohandshake:", err)
		} else if err := os.Rename(tmp, os.Args[1]); err != nil {
			fmt.Fprintln(os.Stderr, "nohandshake:", err)
		}
	}
	fmt.Fprintln(os.Stderr, "nohandshake: started, will never complete the handshake")
	time.Sleep(time.Hour)
}
