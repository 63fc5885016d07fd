"""kccm.kube."""
