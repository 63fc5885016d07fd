// Command kube-apiserver is a thin wrapper around the upstream apiserver command so that it
// can be built from Go modules (k8s.io/kubernetes cannot be `go install`ed directly).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
