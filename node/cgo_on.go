//go:build cgo

package node

// cgoBuild: pebble allocates its cache and memtables with C's allocator.
const cgoBuild = true
