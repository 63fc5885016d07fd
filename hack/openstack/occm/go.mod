// The wrapper module that builds upstream's openstack-cloud-controller-manager (main.go here is
// its cmd/openstack-cloud-controller-manager/main.go). `go install ...@v1.36.0` refuses the
// release because its go.mod has replace directives; a module that requires the release and
// repeats those directives builds the same binary: the release's own requirements come in by
// minimal version selection, and hack/openstack/build-occm.sh checks that the build list holds
// exactly the versions the release's go.mod pins and that the replacements below are its own.
module kccm.invalid/occm

go 1.26.0

require k8s.io/cloud-provider-openstack v1.36.0

// the below fixes the "go list -m all" execution
replace (
	k8s.io/cluster-bootstrap => k8s.io/cluster-bootstrap v0.36.0
	k8s.io/cri-client => k8s.io/cri-client v0.36.0
	k8s.io/cri-streaming => k8s.io/cri-streaming v0.36.0
	k8s.io/endpointslice => k8s.io/endpointslice v0.36.0
	k8s.io/externaljwt => k8s.io/externaljwt v0.36.0
	k8s.io/kube-aggregator => k8s.io/kube-aggregator v0.36.0
	k8s.io/kube-controller-manager => k8s.io/kube-controller-manager v0.36.0
	k8s.io/kube-proxy => k8s.io/kube-proxy v0.36.0
	k8s.io/kube-scheduler => k8s.io/kube-scheduler v0.36.0
	k8s.io/sample-apiserver => k8s.io/sample-apiserver v0.36.0
)
