package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/intentledger/intentd/client"
)

// cmdSnapshot is "snapshot save FILE", "snapshot restore FILE [--force]"
// and "snapshot dump FILE [--out OUT]".
func cmdSnapshot(ctx context.Context, c *cli, args []string) error {
	sub, rest, err := needSubcommand("snapshot", args, "save", "restore", "dump")
	if err != nil {
		return err
	}
	switch sub {
	case "save":
		return snapshotSave(ctx, c, rest)
	case "restore":
		return snapshotRestore(ctx, c, rest)
	default: // "dump"
		return snapshotDump(c, rest)
	}
}

// snapshotSave streams the snapshot into FILE.tmp, verifies its format
// and SHA-256 trailer by decoding it, then renames it to FILE: a file
// named FILE is always a complete, verified snapshot. FILE has mode 0600:
// a snapshot holds every intent and the signing keys (sealed or not).
func snapshotSave(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("snapshot save")
	pos, err := c.parse(fs, args, "FILE")
	if err != nil {
		return err
	}
	file := pos[0]
	cl, ctx, cancel, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	tmp, err := os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".tmp-*")
	if err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	// CreateTemp makes 0600 files; say so rather than rely on it.
	err = tmp.Chmod(0o600)
	var info client.SnapshotInfo
	if err == nil {
		info, err = cl.SaveSnapshot(ctx, tmp)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	v, err := verifySnapshot(tmp.Name())
	if err != nil {
		return fmt.Errorf("snapshot save: the downloaded snapshot is bad, nothing kept: %w", err)
	}
	if v.Index != info.Index || v.Intents != info.Intents {
		return fmt.Errorf("snapshot save: headers said index %d, %d intents; the body holds index %d, %d intents", info.Index, info.Intents, v.Index, v.Intents)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	if c.output == "json" {
		return c.printJSON(map[string]any{"file": file, "snapshot": v})
	}
	fmt.Fprintf(c.stdout, "saved %s: index %d, %d intents, %d bytes, sha256 %s (verified)\n", file, v.Index, v.Intents, v.Bytes, v.Digest)
	return nil
}

// snapshotRestore verifies FILE locally, then restores it into the
// cluster (refused by a non-empty ledger unless --force).
func snapshotRestore(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("snapshot restore")
	force := fs.Bool("force", false, "replace a ledger that holds intents (destroys them)")
	pos, err := c.parse(fs, args, "FILE")
	if err != nil {
		return err
	}
	v, err := verifySnapshot(pos[0])
	if err != nil {
		return usagef("snapshot restore: %s is not a good snapshot: %v", pos[0], err)
	}
	data, err := os.ReadFile(pos[0])
	if err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	info, err := call(ctx, c, func(ctx context.Context, cl *client.Client) (client.SnapshotInfo, error) {
		return cl.RestoreSnapshot(ctx, data, *force)
	})
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(map[string]any{"status": "restored", "snapshot": info})
	}
	fmt.Fprintf(c.stdout, "restored %s: index %d, %d intents, sha256 %s\n", pos[0], info.Index, info.Intents, v.Digest)
	return nil
}

// snapshotDump verifies a snapshot file and writes it again as a JSON
// dump (fsm.Machine.WriteSnapshotJSON): a header line, one JSON object per
// intent, one per audit log event and the SHA-256 trailer. jq reads it;
// it is a view, not a snapshot (restore refuses it).
func snapshotDump(c *cli, args []string) error {
	fs := c.flags("snapshot dump")
	out := fs.String("out", "-", "where to write (- for standard output)")
	pos, err := c.parse(fs, args, "FILE")
	if err != nil {
		return err
	}
	f, err := os.Open(pos[0])
	if err != nil {
		return fmt.Errorf("snapshot dump: %w", err)
	}
	defer f.Close()
	snap, err := decodeSnapshot(f)
	if err != nil {
		return usagef("snapshot dump: %s is not a good snapshot: %v", pos[0], err)
	}
	if *out == "-" {
		w := bufio.NewWriter(c.stdout)
		if err := snap.writeJSONLines(w); err != nil {
			return fmt.Errorf("snapshot dump: %w", err)
		}
		return w.Flush()
	}
	tmp, err := os.CreateTemp(filepath.Dir(*out), filepath.Base(*out)+".tmp-*")
	if err != nil {
		return fmt.Errorf("snapshot dump: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	w := bufio.NewWriter(tmp)
	err = snap.writeJSONLines(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), *out)
	}
	if err != nil {
		return fmt.Errorf("snapshot dump: %w", err)
	}
	fmt.Fprintf(c.stderr, "wrote %s: index %d, %d intents as JSON lines\n", *out, snap.index(), snap.intents())
	return nil
}
