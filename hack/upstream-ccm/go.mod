// The wrapper module that builds upstream's cloud-controller-manager framework
// (k8s.io/cloud-provider) with upstream's own fake cloud (k8s.io/cloud-provider/fake) registered
// as the provider "fake": the binary bench/node_init_vs_upstream.py compares kccm with. main.go
// is modeled on the release's sample/basic_main.go; hack/upstream-ccm/build.sh checks that every
// module the binary is built from is selected at the version k8s.io/cloud-provider's go.mod pins.
module kccm.invalid/upstream-ccm

go 1.26.0

godebug default=go1.26

require (
	k8s.io/api v0.36.3
	k8s.io/apimachinery v0.36.3
	k8s.io/cloud-provider v0.36.3
	k8s.io/component-base v0.36.3
	k8s.io/klog/v2 v2.140.0
)
