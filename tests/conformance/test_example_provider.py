"""The example third-party provider, installed from examples/external-provider, is found by
name through the registry and passes the conformance kit."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kccm.cloudprovider import Interface, Node, init_cloud_provider
from kccm.testing.conformance import CloudProviderConformance, make_node


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
