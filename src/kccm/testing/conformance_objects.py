"""The Kubernetes objects the conformance kit hands providers: Services and Nodes shaped as the
API server returns them."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

__all__ = ["make_node", "make_service"]


def make_service(
    name: str, *, namespace: str = "default", ports: Sequence[int] = (80,), uid: str | None = None
) -> dict[str, Any]:
    """A ``type: LoadBalancer`` Service as the API server would return it."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "uid": uid or str(uuid.uuid4())},
        "spec": {
            "type": "LoadBalancer",
            "ports": [
                {"name": f"p{port}", "port": port, "protocol": "TCP", "nodePort": 30000 + i}
                for i, port in enumerate(ports)
            ],
        },
    }


def make_node(name: str, *, provider_id: str = "", address: str = "10.0.0.1") -> dict[str, Any]:
    """A Node as the API server would return it."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": str(uuid.uuid4()), "labels": {}},
        "spec": {"providerID": provider_id} if provider_id else {},
        "status": {"addresses": [{"type": "InternalIP", "address": address}]},
    }
