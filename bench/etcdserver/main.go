// Command etcd is etcd's server, built from the go.etcd.io/etcd/server/v3
// module pinned in this directory's go.mod. It exists only so that
// bench/scripts/bench-compare.sh can build the exact etcd release it compares
// against with the ordinary Go toolchain: etcd's 3.5 server module carries
// replace directives, so `go install go.etcd.io/etcd/server/v3@v3.5.x`
// refuses to build it directly.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
