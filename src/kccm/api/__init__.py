"""Well-known Kubernetes names (labels, taints, annotations, finalizers) kccm reads or writes."""
