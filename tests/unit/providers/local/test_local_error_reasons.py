"""The local provider's errors as the contract's kinds (kccm explain's reasons): an exhausted
VIP pool is the local cloud's quota; a Service field it cannot serve is an invalid config
naming the field."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kccm.cloudprovider import InvalidServiceConfig, QuotaExceeded, Reason, classify
from kccm.providers.local import LocalCloud
from kccm.providers.local.config import load_local_config
from kccm.providers.local.provider import LocalLoadBalancerError
from kccm.providers.local.store import LocalStore

CLUSTER = "kubernetes"
SOURCE_RANGES = "service.beta.kubernetes.io/load-balancer-source-ranges"


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[LocalCloud]:

    store = LocalStore(tmp_path / "state.db")
    yield LocalCloud(store, load_local_config(io.StringIO("[Global]\nvip-range = 127.0.20.0/30\n")))
    store.close()


def service(name: str, annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": name, "annotations": annotations},
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"name": "http", "protocol": "TCP", "port": 80, "nodePort": 30080}],
            **spec,
        },
    }


def test_an_exhausted_pool_is_a_quota(cloud: LocalCloud) -> None:
    made: list[str] = []
    refused: list[QuotaExceeded] = []
    for name in (f"s{i}" for i in range(8)):
        try:
            cloud.ensure_load_balancer(CLUSTER, service(name), [])
        except QuotaExceeded as err:
            refused.append(err)
            break
        made.append(name)
    assert made, "the pool had room for some"
    (error,) = refused
    assert "exhausted" in str(error)
    assert isinstance(error, LocalLoadBalancerError)
    assert classify(error) is Reason.QUOTA


@pytest.mark.parametrize(
    ("svc", "key"),
    [
        pytest.param(service("a", loadBalancerIP="192.0.2.1"), "spec.loadBalancerIP", id="ip"),
        pytest.param(
            service("b", {SOURCE_RANGES: "x/99"}), "spec.loadBalancerSourceRanges", id="ranges"
        ),
        pytest.param(
            service("c", ports=[{"name": "s", "protocol": "SCTP", "port": 9, "nodePort": 30009}]),
            "spec.ports",
            id="sctp",
        ),
    ],
)
def test_a_field_it_cannot_serve_is_an_invalid_config(
    cloud: LocalCloud, svc: dict[str, Any], key: str
) -> None:
    with pytest.raises(InvalidServiceConfig) as caught:
        cloud.ensure_load_balancer(CLUSTER, svc, [])
    assert (caught.value.key, classify(caught.value)) == (key, Reason.INVALID)
    assert isinstance(caught.value, LocalLoadBalancerError)
