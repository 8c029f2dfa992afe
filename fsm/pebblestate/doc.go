// Package pebblestate keeps the state machine's tables (fsm.Store) in a
// pebble database on disk, so a replica's memory is a bounded cache rather
// than the whole ledger (fsm/DESIGN.md, "Next: the state machine on disk").
//
// The WAL is off: the Raft log already is the durable record of every
// entry, so a commit only has to be consistent, never durable. Writes since
// the last Commit sit in one indexed batch that reads see, and commit
// without an fsync. A crash loses the memtables, never half of a Commit;
// the node replays what it lost from the Raft log, after the applied index
// the store holds. Sync, called when Raft takes a snapshot and before it may
// compact its log, flushes the memtables to sstables (db.Flush): with the
// WAL off that is what makes the store durable.
//
// An installed Raft snapshot must replace the whole state at once while
// older views may still be streaming a snapshot out of the old state. A Dir
// therefore keeps generations: one pebble database per subdirectory, and a
// small CURRENT file naming the live one. A snapshot is restored into a
// staged generation (Stage), which Promote makes current with one atomic,
// fsynced rename of CURRENT; the old generation is closed and deleted when
// its last view is released. A crash before the rename leaves the old
// generation current, after it the new one; whatever else is found is
// debris of an interrupted staging, which OpenDir deletes.
package pebblestate
