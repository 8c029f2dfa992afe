//go:build !unix

package node

import "errors"

// diskSpace is not measured on this platform: the data dir gauges are
// absent.
func diskSpace(string) (free, size uint64, err error) {
	return 0, 0, errors.New("node: disk space is measured on unix only")
}
