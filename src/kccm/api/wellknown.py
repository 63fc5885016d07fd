"""Every label, taint, annotation and finalizer key kccm uses, in one place."""

from __future__ import annotations

__all__ = [
    "ANNOTATION_LB_SPEC_HASH",
    "ANNOTATION_LEASE_LB_CLASSES",
    "ANNOTATION_LEASE_LB_CLASS_LESS",
    "ANNOTATION_PROVIDED_NODE_IP",
    "ANNOTATION_PV_LABELED",
    "ANNOTATION_TARGET_NODE_SELECTOR",
    "FINALIZER_LB_CLEANUP",
    "LABEL_EXCLUDE_FROM_EXTERNAL_LB",
    "LABEL_INSTANCE_TYPE",
    "LABEL_INSTANCE_TYPE_BETA",
    "LABEL_REGION",
    "LABEL_REGION_BETA",
    "LABEL_ZONE",
    "LABEL_ZONE_BETA",
    "TAINT_NODE_SHUTDOWN",
    "TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER",
    "TAINT_UNINITIALIZED",
]

TAINT_UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
TAINT_NODE_SHUTDOWN = "node.cloudprovider.kubernetes.io/shutdown"
# Set by the cluster autoscaler on a node it is about to delete (service LB backends skip it).
TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER = "ToBeDeletedByClusterAutoscaler"

LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_INSTANCE_TYPE_BETA = "beta.kubernetes.io/instance-type"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_REGION_BETA = "failure-domain.beta.kubernetes.io/region"
LABEL_EXCLUDE_FROM_EXTERNAL_LB = "node.kubernetes.io/exclude-from-external-load-balancers"

ANNOTATION_PROVIDED_NODE_IP = "alpha.kubernetes.io/provided-node-ip"

FINALIZER_LB_CLEANUP = "service.kubernetes.io/load-balancer-cleanup"

# Set by pv-label-controller once it has asked the provider for a PV's labels (the legacy
# controller removed its initializer "pvlabel.kubernetes.io" instead): done, never again.
ANNOTATION_PV_LABELED = "pvlabel.kubernetes.io/labeled"

# Written by kccm up to issue 16 on every LoadBalancer Service (a hash of what its load balancer
# was built from). kccm writes it no more; the service controller removes a leftover one with
# the next patch it sends that Service anyway.
ANNOTATION_LB_SPEC_HASH = "service.kccm.io/load-balancer-spec-hash"

# Read (never written) by service-lb-controller on a LoadBalancer Service: a label selector
# (Kubernetes string syntax) choosing which Nodes back its balancer, on top of upstream's
# exclusions (docs/behaviour.md, "Target Nodes per Service").
ANNOTATION_TARGET_NODE_SELECTOR = "service.kccm.io/target-node-selector"

# On kccm's OWN leader-election Lease (never on users' objects), written with every renewal
# while service-lb-controller is enabled: the spec.loadBalancerClass values this deployment
# serves (comma-separated, "" for none) and whether it serves class-less Services ("true" /
# "false"). `kccm explain` reads them to say which deployment owns a Service.
ANNOTATION_LEASE_LB_CLASSES = "kccm.io/load-balancer-classes"
ANNOTATION_LEASE_LB_CLASS_LESS = "kccm.io/load-balancer-class-less"
