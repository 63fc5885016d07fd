// Command etcd wraps etcdmain so etcd can be built from Go modules (the server module has
// replace lines, so `go install` of it is refused).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
