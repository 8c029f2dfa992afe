package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/fsm"
)

// verifySnapshot decodes a snapshot file completely (format, order, count
// and SHA-256 trailer) and returns what it holds.
func verifySnapshot(path string) (client.SnapshotInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return client.SnapshotInfo{}, err
	}
	defer f.Close()
	h := sha256.New()
	n := &countReader{r: io.TeeReader(f, h)}
	l, err := fsm.Restore(n)
	if err != nil {
		return client.SnapshotInfo{}, err
	}
	if extra, _ := io.Copy(io.Discard, n); extra > 0 {
		return client.SnapshotInfo{}, fmt.Errorf("%d bytes after the trailer", extra)
	}
	return client.SnapshotInfo{Index: l.AppliedIndex(), Intents: l.Len(), Digest: hex.EncodeToString(h.Sum(nil)), Bytes: n.n}, nil
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}
