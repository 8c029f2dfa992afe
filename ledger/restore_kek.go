package ledger

import (
	"errors"
	"fmt"
	"io"

	"github.com/intentledger/intentd/fsm"
)

// ErrPlaintextSeedRestore refuses a snapshot restore that would bring a
// signing key with a plaintext seed into a cluster whose nodes seal their
// keys (this node has a key-encryption key): the seed would sit in the
// clear in the Raft log's snapshots and every backup from then on, which
// the KEK is there to prevent. Errors that wrap it wrap fsm.ErrBadSnapshot
// as well. Nothing was restored.
var ErrPlaintextSeedRestore = errors.New("the snapshot holds a signing key with a plaintext seed and this node seals its keys with a key-encryption key (KEK)")

// ErrForeignKEKRestore refuses a snapshot restore whose sealed signing
// keys do not open with this node's key-encryption key: restored, no node
// could sign or verify with them. Errors that wrap it wrap
// fsm.ErrBadSnapshot as well. Nothing was restored.
var ErrForeignKEKRestore = errors.New("the snapshot holds a signing key sealed with another key-encryption key (KEK)")

// CheckRestoreKeys reads the signing keys of a snapshot (its header only,
// fsm.SnapshotSigningKeys) before it is restored, and refuses one that
// holds a plaintext seed when this node has a key-encryption key
// (Config.KEK): ErrPlaintextSeedRestore, naming the key; or one sealed with
// another KEK: ErrForeignKEKRestore. A node without a KEK
// accepts every form, as before KEKs existed, and does not read the
// snapshot. A header that does not parse is an error wrapping
// fsm.ErrBadSnapshot. The check changes nothing; call it before handing
// the snapshot to the replicator.
func (s *Service) CheckRestoreKeys(snapshot io.Reader) error {
	kr := s.keyring()
	if kr == nil || kr.kek == nil {
		return nil
	}
	keys, err := fsm.SnapshotSigningKeys(snapshot)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	for _, k := range keys {
		if len(k.Sealed) == 0 {
			return fmt.Errorf("%w: %w: signing key %s is stored in the clear; nothing was restored "+
				"(restore a snapshot taken after every plaintext key was rotated out under the KEK)",
				fsm.ErrBadSnapshot, ErrPlaintextSeedRestore, k.ID)
		}
		// A key sealed under another KEK would leave the cluster unable to
		// issue or verify tokens with it once restored.
		seed, err := kr.kek.Open(k.ID, k.Sealed)
		if err != nil {
			return fmt.Errorf("%w: %w: signing key %s does not open with this node's KEK (id %s); nothing was restored "+
				"(restore it on a cluster that has the KEK it was sealed with)", fsm.ErrBadSnapshot, ErrForeignKEKRestore, k.ID, kr.kek.ID())
		}
		clear(seed)
	}
	return nil
}
