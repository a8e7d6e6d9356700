// Command etcd runs the etcd server pinned by this module, for the local test cluster only.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
