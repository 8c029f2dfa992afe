package node

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/intentledger/intentd/token"
)

// KEKEnvVar is the environment variable a node reads its key-encryption
// key from: the base64 of 32 bytes (intentctl kek new writes that form).
const KEKEnvVar = "INTENTD_KEK"

// maxKEKFileBytes bounds what is read of a KEK file: 32 bytes, or their
// base64 with some whitespace.
const maxKEKFileBytes = 1 << 10

// KEKConfig is where the node's key-encryption key (KEK) comes from. The
// KEK seals the execution-token signing seeds this node adds, so the Raft
// log, snapshots and backups hold no plaintext seed, and opens the sealed
// seeds it signs and verifies with. Every node of a cluster needs the same
// KEK (like the gossip key); without one the node stores seeds in the
// clear, as earlier versions did.
type KEKConfig struct {
	// File is a file of 32 random bytes, or their base64, that only its
	// owner may read or write (mode 0600 or stricter): --kek-file.
	File string
	// Value is the base64 of 32 bytes: the INTENTD_KEK environment
	// variable. At most one of File and Value may be set.
	Value string
}

// Errors of loading a KEK.
var (
	// errKEKFileMode: a KEK file others may read (or write).
	errKEKFileMode = errors.New("--kek-file must be readable and writable by its owner only (chmod 600)")
	// errKEKTwice: both --kek-file and INTENTD_KEK.
	errKEKTwice = errors.New("give --kek-file or " + KEKEnvVar + ", not both")
)

// load reads the KEK, nil when none is configured. It logs, once, that
// signing seeds are stored unencrypted when there is no KEK (and, when
// authRequired says the node runs for real, how to add one), or the KEK's
// public ID when there is one, so operators can check every node holds
// the same.
func (k KEKConfig) load(log *slog.Logger, authRequired bool) (*token.KEK, error) {
	var kek *token.KEK
	var err error
	switch {
	case k.File != "" && k.Value != "":
		return nil, errKEKTwice
	case k.File != "":
		kek, err = readKEKFile(k.File)
	case k.Value != "":
		if kek, err = token.DecodeKEK(k.Value); err != nil {
			err = fmt.Errorf("%s: %w", KEKEnvVar, err)
		}
	default:
		msg := "execution-token signing seeds are stored UNENCRYPTED in the Raft log, snapshots and backups: no --kek-file or " + KEKEnvVar
		if !authRequired {
			log.Warn(msg)
			return nil, nil
		}
		log.Warn(msg+"; unless the data directory and every backup sit on encrypted storage, add a key-encryption key: "+
			"intentctl kek new --out FILE, then start every node with --kek-file FILE (or "+KEKEnvVar+"), "+
			"and rotate the signing key (POST /v1/keys/rotate) so new tokens use a sealed key",
			"docs", "docs/security.md")
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	log.Info("execution-token signing seeds this node adds are sealed with the key-encryption key", "kek_id", kek.ID())
	return kek, nil
}

// readKEKFile reads a KEK file, refusing one that is not a regular file or
// that its group or others may access.
func readKEKFile(path string) (*token.KEK, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--kek-file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("--kek-file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("--kek-file %s: not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %#o", errKEKFileMode, path, perm)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKEKFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--kek-file: %w", err)
	}
	defer clear(data)
	if len(data) > maxKEKFileBytes {
		return nil, fmt.Errorf("--kek-file %s: over %d bytes, not a key-encryption key", path, maxKEKFileBytes)
	}
	kek, err := token.ParseKEK(data)
	if err != nil {
		return nil, fmt.Errorf("--kek-file %s: %w", path, err)
	}
	return kek, nil
}
