package plugin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/compact-host/compact-host/abi"
)

// infoCache keeps what process plugins said about themselves, by the
// content hash of their manifest and executable: listing plugins, or
// starting a host, runs no plugin whose files it has seen before. The
// process starts at the plugin's first use.
type infoCache struct {
	dir string // empty: memory only

	mu  sync.Mutex
	mem map[string]abi.Info
}

// maxInfoBytes bounds a cached Info file.
const maxInfoBytes = 64 << 10

func newInfoCache(o Options) *infoCache {
	c := &infoCache{mem: map[string]abi.Info{}}
	if dir := o.cacheDir(); dir != "" {
		c.dir = filepath.Join(dir, "plugin-info")
	}
	return c
}

// key is the cache key of a manifest and its executable, or "" when the
// executable cannot be read (the start will say why).
func (c *infoCache) key(manifest []byte, command string, o Options) string {
	path, err := exec.LookPath(command)
	if err != nil {
		return ""
	}
	h := sha256.New()
	// The format of the key: bump the prefix when what is hashed changes.
	h.Write([]byte("compact-host plugin info v1\x00"))
	h.Write(manifest)
	h.Write([]byte{0})
	if err := hashRegular(h, path, o.maxFileBytes(), "plugin.Options.MaxFileBytes"); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (c *infoCache) get(key string) (abi.Info, bool) {
	if key == "" {
		return abi.Info{}, false
	}
	c.mu.Lock()
	info, ok := c.mem[key]
	c.mu.Unlock()
	if ok || c.dir == "" {
		return info, ok
	}
	b, err := readRegular(filepath.Join(c.dir, key+".json"), maxInfoBytes, "the plugin info cache")
	if err != nil {
		return abi.Info{}, false
	}
	// A cache file that does not decode, or that no host could have
	// written, is a miss: the plugin is started and the file rewritten.
	if json.Unmarshal(b, &info) != nil || info.ABIMajor != abi.Major || info.Name == "" {
		return abi.Info{}, false
	}
	c.mu.Lock()
	c.mem[key] = info
	c.mu.Unlock()
	return info, true
}

// put remembers info under key. A failed write costs a start next time,
// nothing more; the file is written whole or not at all.
func (c *infoCache) put(key string, info abi.Info) error {
	if key == "" {
		return nil
	}
	c.mu.Lock()
	c.mem[key] = info
	c.mu.Unlock()
	if c.dir == "" {
		return nil
	}
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(c.dir, "."+key+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(c.dir, key+".json"))
	}
	if err != nil {
		return errors.Join(err, os.Remove(f.Name()))
	}
	return nil
}
