// Command nohandshake is a hostile process plugin: it starts, says so on
// stderr, and never writes the go-plugin handshake line.
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	fmt.Fprintln(os.Stderr, "nohandshake: started, will never complete the handshake")
	time.Sleep(time.Hour)
}
