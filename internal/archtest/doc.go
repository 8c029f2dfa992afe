// Package archtest holds the test that keeps the package picture of
// docs/architecture.md true: which intentd package may import which, the
// dependencies it rules out even through other packages (the API on the
// cluster, the cluster on the ledger service, the server on the SDK), that
// the state machine imports nothing that could make it nondeterministic,
// and that the Go SDK (client and everything under client/) imports only
// the standard library and itself. It has no code of its own.
package archtest
