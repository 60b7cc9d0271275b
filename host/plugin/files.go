package plugin

import (
	"fmt"
	"hash"
	"io"
	"os"
	"syscall"
)

// DefaultMaxFileBytes bounds a plugin file the host reads: a .wasm module,
// or a process plugin's executable, which the host hashes.
const DefaultMaxFileBytes = 256 << 20

// MaxManifestBytes bounds a *.plugin.json manifest.
const MaxManifestBytes = 64 << 10

func (o Options) maxFileBytes() int64 {
	if o.MaxFileBytes > 0 {
		return o.MaxFileBytes
	}
	return DefaultMaxFileBytes
}

// openRegular opens path for reading if it is a regular file (a symlink
// to one is fine) of at most limit bytes, and refuses anything else: a
// FIFO would block the read for ever, /dev/zero never end it. The open
// does not block even if a FIFO replaced the file after the Stat, and the
// check is made again on the open file.
func openRegular(path string, limit int64, option string) (*os.File, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := checkRegular(path, info, limit, option); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if info, err = f.Stat(); err == nil {
		err = checkRegular(path, info, limit, option)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func checkRegular(path string, info os.FileInfo, limit int64, option string) error {
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (mode %s): refused; a plugin file must be a regular file or a symlink to one", path, info.Mode().Type())
	}
	if info.Size() > limit {
		return fmt.Errorf("%s is %d bytes, over the limit of %d (%s)", path, info.Size(), limit, option)
	}
	return nil
}

// readRegular reads the regular file at path, of at most limit bytes. The
// read stops at the limit even if the file grows while it is read.
func readRegular(path string, limit int64, option string) ([]byte, error) {
	f, err := openRegular(path, limit, option)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s grew over the limit of %d bytes (%s) while read", path, limit, option)
	}
	return b, nil
}

// hashRegular writes the content of the regular file at path into h.
func hashRegular(h hash.Hash, path string, limit int64, option string) error {
	f, err := openRegular(path, limit, option)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(h, io.LimitReader(f, limit+1))
	if err != nil {
		return err
	}
	if n > limit {
		return fmt.Errorf("%s grew over the limit of %d bytes (%s) while read", path, limit, option)
	}
	return nil
}
