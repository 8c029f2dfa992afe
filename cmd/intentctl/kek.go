package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"

	"github.com/intentledger/intentd/token"
)

// ---- key-encryption keys ----

// cmdKEK is "kek new --out FILE": it makes a key-encryption key offline,
// the one every node of a cluster is started with (--kek-file) to seal
// execution-token signing seeds in the Raft log and snapshots.
func cmdKEK(_ context.Context, c *cli, args []string) error {
	_, rest, err := needSubcommand("kek", args, "new")
	if err != nil {
		return err
	}
	fs := c.flags("kek new")
	out := fs.String("out", "", "file to write the key into (mode 0600; must not exist)")
	if _, err := c.parse(fs, rest); err != nil {
		return err
	}
	if err := required("out", *out); err != nil {
		return err
	}
	key, err := token.GenerateKEK(rand.Reader)
	if err != nil {
		return err
	}
	defer clear(key)
	text := []byte(base64.StdEncoding.EncodeToString(key) + "\n")
	defer clear(text)
	// The server's own parser is the judge of the file.
	kek, err := token.ParseKEK(text)
	if err != nil {
		return fmt.Errorf("kek new: %w", err)
	}
	if err := writeSecretFile(*out, text); err != nil {
		return fmt.Errorf("kek new: %w", err)
	}
	if c.output == "json" {
		return c.printJSON(map[string]any{"file": *out, "kek_id": kek.ID()})
	}
	fmt.Fprintf(c.stdout, "wrote the key-encryption key to %s (mode 0600, id %s; the base64 of 32 random bytes)\n", *out, kek.ID())
	fmt.Fprintf(c.stdout, "give every node of the cluster the same key:\n"+
		"  intentd --kek-file %s ...   (or INTENTD_KEK=\"$(cat %s)\")\n"+
		"each node logs the id at start (kek_id=%s); then rotate the signing key (intentctl keys rotate) so new tokens use a sealed one.\n"+
		"keep a copy apart from the data directory and the backups: without the key the sealed signing keys cannot be used.\n",
		*out, *out, kek.ID())
	return nil
}

// writeSecretFile creates path with mode 0600 (never replacing a file that
// exists) and writes data into it; on failure nothing is left at path.
func writeSecretFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists; not replacing it (a key-encryption key in use must not change: the sealed signing keys need it)", path)
	}
	if err != nil {
		return err
	}
	// The mode is 0600 whatever the umask (which only removes bits).
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return err
	}
	return nil
}
