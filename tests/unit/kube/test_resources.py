from __future__ import annotations

import pytest

from kccm.kube.resources import LEASES, NODES, SERVICES, Resource


@pytest.mark.parametrize(
    ("resource", "name", "namespace", "path"),
    [
        pytest.param(NODES, "n1", None, "/api/v1/nodes/n1", id="cluster-scoped-core"),
        pytest.param(SERVICES, "s", "ns", "/api/v1/namespaces/ns/services/s", id="namespaced"),
        pytest.param(
            LEASES,
            "l",
            "kube-system",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l",
            id="named-group",
        ),
    ],
)
def test_object_paths(resource: Resource, name: str, namespace: str | None, path: str) -> None:
    assert resource.object_path(name, namespace) == path


def test_collection_across_namespaces() -> None:
    assert SERVICES.collection_path() == "/api/v1/services"


@pytest.mark.parametrize(
    ("resource", "name", "namespace", "message"),
    [
        pytest.param(SERVICES, "s", None, "namespaced", id="namespace-required"),
        pytest.param(NODES, "", None, "name is required", id="name-required"),
    ],
)
def test_bad_paths_are_refused(
    resource: Resource, name: str, namespace: str | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        resource.object_path(name, namespace)
