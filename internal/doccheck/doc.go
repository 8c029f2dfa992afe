// Package doccheck keeps the repository's Markdown honest, as tests that
// `go test ./...` (and so `make test`) runs:
//
//   - every relative link in every Markdown file resolves: the file or
//     directory exists inside the repository, and a #fragment names a
//     heading of the target (GitHub's anchor rules) or an explicit anchor;
//   - no file refers outside the repository (absolute paths of this
//     workplace, the steering folder beside the repository, links that
//     climb above the repository root);
//   - every `make TARGET` the docs name (in code blocks and code spans)
//     is a target of the Makefile;
//   - every curl example of docs/getting-started.md and of the README's
//     tour runs against a real in-process three-node cluster (as
//     `make run` starts one, auth off) and answers the status code the doc
//     writes beside it (skipped under -short).
//
// The non-test code is the Markdown and shell scanning the tests use; it
// imports the standard library only.
package doccheck
