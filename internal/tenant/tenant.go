// Package tenant derives the scope under which the proxy and serve keep
// what one credential made: stored compactions, summaries, locks, session
// IDs and quotas. A tenant is a keyed hash of the credential, so nothing
// stored can be turned back into a key, nor tested against a guessed key
// by anyone who lacks the secret.
package tenant

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// ID names a tenant in store keys, lock names, logs and metrics. It is
// safe to show: it reveals neither the credential nor whether two
// deployments with different secrets serve the same one.
type ID string

// Anonymous is the tenant of requests that carry no credential. It is kept
// apart from every keyed tenant.
const Anonymous ID = "anonymous"

// Shared is the one tenant of a deployment that shares compactions across
// credentials on purpose (the proxy's --share-compactions).
const Shared ID = "shared"

// idBytes is how much of the HMAC an ID keeps: 128 bits, far beyond any
// chance of two credentials colliding.
const idBytes = 16

// MinSecretBytes is the least secret a Keyer accepts.
const MinSecretBytes = 16

// Keyer derives tenant IDs from credentials with one secret. Replicas that
// share a store must share the secret, or each sees only its own tenants'
// entries.
type Keyer struct {
	secret []byte
}

// NewKeyer returns a Keyer for secret, which must hold at least
// MinSecretBytes bytes.
func NewKeyer(secret []byte) (*Keyer, error) {
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("tenant secret: %d bytes, at least %d needed", len(secret), MinSecretBytes)
	}
	return &Keyer{secret: append([]byte(nil), secret...)}, nil
}

// NewRandomKeyer returns a Keyer with a secret of its own, for a single
// process: its IDs mean nothing to another process.
func NewRandomKeyer() *Keyer {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		panic("tenant: no randomness: " + err.Error()) // crypto/rand does not fail on supported platforms
	}
	return &Keyer{secret: secret}
}

// LoadKeyer reads a secret file (surrounding white space ignored) and
// returns its Keyer. Errors name the file.
func LoadKeyer(path string) (*Keyer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tenant secret file: %w", err)
	}
	k, err := NewKeyer([]byte(strings.TrimSpace(string(b))))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// Of returns the tenant of credential; "" is Anonymous. Credentials are
// compared exactly: the caller strips a scheme such as "Bearer " first if
// two spellings of one key must meet.
func (k *Keyer) Of(credential string) ID {
	if credential == "" {
		return Anonymous
	}
	mac := hmac.New(sha256.New, k.secret)
	mac.Write([]byte(credential))
	return ID("t-" + hex.EncodeToString(mac.Sum(nil)[:idBytes]))
}
