//go:build !cgo

package node

// cgoBuild: pebble allocates its cache and memtables on the Go heap.
const cgoBuild = false
