// The wrapper module that builds upstream's cloud-controller-manager and cloud-node-manager
// (ccm/main.go and cnm/main.go here are the release's cmd/cloud-controller-manager/
// controller-manager.go and cmd/cloud-node-manager/node-manager.go). `go install ...@v1.36.5`
// fails on the module proxy's 403 for @v/list, and a main package cannot be imported, so this
// module requires the release and carries copies of its two mains; the release's own
// requirements come in by minimal version selection, and hack/azure/build.sh checks that the
// build list holds exactly the versions the release's go.mod pins and that the go and godebug
// directives below are the release's (a main module's godebug line sets the binary's defaults).
module kccm.invalid/azure

go 1.26.0

godebug default=go1.26

require sigs.k8s.io/cloud-provider-azure v1.36.5
