//go:build unix

package node

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// diskSpace returns the bytes an unprivileged process may still write on
// the file system holding dir, and the file system's size.
func diskSpace(dir string) (free, size uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	bs := uint64(st.Bsize)
	return uint64(st.Bavail) * bs, uint64(st.Blocks) * bs, nil
}
