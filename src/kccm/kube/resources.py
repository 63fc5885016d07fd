"""Descriptors for the Kubernetes resources kccm reads and writes."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CLUSTER_ROLES",
    "CLUSTER_ROLE_BINDINGS",
    "CONFIG_MAPS",
    "DAEMON_SETS",
    "DEPLOYMENTS",
    "ENDPOINT_SLICES",
    "EVENTS",
    "LEASES",
    "NAMESPACES",
    "NODES",
    "PERSISTENT_VOLUMES",
    "POD_DISRUPTION_BUDGETS",
    "ROLES",
    "ROLE_BINDINGS",
    "SECRETS",
    "SERVICES",
    "SERVICE_ACCOUNTS",
    "SUBJECT_ACCESS_REVIEWS",
    "TOKEN_REVIEWS",
    "Resource",
]


@dataclass(frozen=True, slots=True)
class Resource:
    """One REST resource: where it lives and how it is named."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    has_status: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def collection_path(self, namespace: str | None = None) -> str:
        """The URL path of the collection (all namespaces when ``namespace`` is None)."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            return f"{root}/namespaces/{namespace}/{self.plural}"
        return f"{root}/{self.plural}"

    def object_path(self, name: str, namespace: str | None = None) -> str:
        if self.namespaced and not namespace:
            raise ValueError(f"{self.kind} {name!r} is namespaced: a namespace is required")
        if not name:
            raise ValueError(f"a {self.kind} name is required")
        return f"{self.collection_path(namespace)}/{name}"

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


NODES = Resource("", "v1", "nodes", "Node", namespaced=False, has_status=True)
SERVICES = Resource("", "v1", "services", "Service", namespaced=True, has_status=True)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False, has_status=True)
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)
PERSISTENT_VOLUMES = Resource(
    "", "v1", "persistentvolumes", "PersistentVolume", namespaced=False, has_status=True
)
EVENTS = Resource("", "v1", "events", "Event", namespaced=True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
CLUSTER_ROLES = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
)
TOKEN_REVIEWS = Resource(
    "authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False
)
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False
)

# Deployment artifacts (deploy/, charts/kccm): applied by tests and tooling, not by controllers.
SECRETS = Resource("", "v1", "secrets", "Secret", namespaced=True)
ENDPOINT_SLICES = Resource(
    "discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", namespaced=True
)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", namespaced=True, has_status=True)
DAEMON_SETS = Resource("apps", "v1", "daemonsets", "DaemonSet", namespaced=True, has_status=True)
POD_DISRUPTION_BUDGETS = Resource(
    "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True, has_status=True
)
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", namespaced=True)
ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", namespaced=True
)
