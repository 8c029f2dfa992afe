// Package archtest holds the test that keeps the package picture of
// docs/architecture.md true: which intentd package may import which, and
// that the state machine imports nothing that could make it
// nondeterministic. It has no code of its own.
package archtest
