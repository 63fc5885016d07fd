"""The example third-party provider, installed from examples/external-provider, is found by
name through the registry and passes the conformance kit."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kccm.cloudprovider import (
    Interface,
    Node,
    Service,
    default_load_balancer_name,
    init_cloud_provider,
)
from kccm.testing.conformance import CloudProviderConformance, LoadBalancerTamper, make_node


def test_selecting_example_imports_no_other_provider() -> None:
    script = textwrap.dedent(
        """
        import json, sys
        from kccm.cloudprovider import init_cloud_provider, known_cloud_providers
        before = set(sys.modules)
        cloud = init_cloud_provider("example", None)
        print(json.dumps({
            "name": cloud.provider_name(),
            "known": known_cloud_providers(),
            "imported": sorted(set(sys.modules) - before),
        }))
        """
    )
    run = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True)
    report = json.loads(run.stdout)
    assert report["name"] == "example"
    assert {"example", "fake"} <= set(report["known"])
    providers = [m for m in report["imported"] if "provider" in m and m.startswith("kccm")]
    assert providers == ["kccm_example_provider"]
    assert "kccm.providers.fake" not in report["imported"]


def _balancers(cloud: Any) -> dict[str, tuple[str, ...]]:
    """The example's in-memory "cloud": balancer name -> host names."""
    balancers: dict[str, tuple[str, ...]] = cloud._balancers
    return balancers


class ExampleTamper:
    """Drift in the example's cloud: a balancer left without hosts, or removed."""

    def change(self, cloud: Interface, cluster_name: str, service: Service) -> None:
        _balancers(cloud)[default_load_balancer_name(service)] = ()

    def delete(self, cloud: Interface, cluster_name: str, service: Service) -> None:
        del _balancers(cloud)[default_load_balancer_name(service)]

    def is_intact(
        self, cloud: Interface, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> bool:
        hosts = _balancers(cloud).get(default_load_balancer_name(service))
        return hosts == tuple(sorted(n["metadata"]["name"] for n in nodes))


class TestExampleProviderFromTheRegistry(CloudProviderConformance):
    @pytest.fixture
    def cloud(self, tmp_path: Path) -> Interface:
        config = tmp_path / "machines.conf"
        config.write_text("[Global]\nmachines = node-a=10.0.0.1\n")
        cloud = init_cloud_provider("example", config)
        assert cloud is not None
        return cloud

    @pytest.fixture
    def known_node(self) -> Node:
        return make_node("node-a")

    @pytest.fixture
    def load_balancer_tamper(self) -> LoadBalancerTamper:
        return ExampleTamper()
