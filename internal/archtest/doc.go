// Package archtest holds the test that keeps the package picture of
// docs/architecture.md true: which intentd package may import which, that
// the state machine imports nothing that could make it nondeterministic,
// and that the Go SDK (client and everything under client/) imports only
// the standard library and itself. It has no code of its own.
package archtest
