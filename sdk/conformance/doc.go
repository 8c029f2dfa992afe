// Package conformance runs one scenario suite against the Go, Python and
// TypeScript SDKs: scenarios.json says what each scenario does and
// key-vectors.json what key each SDK must derive from which parts. The
// tests here start a real three-node cluster (built intentd binaries, auth
// on) and a control server the runners use to kill the leader, then run
// every SDK's runner against it.
package conformance
