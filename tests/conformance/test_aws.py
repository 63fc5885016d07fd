"""The aws provider passes the conformance kit against moto running as a real HTTP server."""

from __future__ import annotations

import importlib.util
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kccm.cloudprovider import Node
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.config import load_aws_config
from kccm.testing.conformance import CloudProviderConformance


def _load_support() -> ModuleType:
    """tests/unit/providers/aws/aws_moto.py (the tests directories are not packages)."""
    if "aws_moto" in sys.modules:
        return sys.modules["aws_moto"]
    path = Path(__file__).resolve().parents[1] / "unit" / "providers" / "aws" / "aws_moto.py"
    spec = importlib.util.spec_from_file_location("aws_moto", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["aws_moto"] = module
    spec.loader.exec_module(module)
    return module


support = _load_support()


@pytest.fixture(scope="module")
def moto_world() -> Iterator[Any]:
    with support.moto_server() as url:
        yield support.build_world(url, f"conf{uuid.uuid4().hex[:6]}", instances=3)


class TestAWSCloud(CloudProviderConformance):
    @pytest.fixture
    def cloud(self, moto_world: Any, monkeypatch: pytest.MonkeyPatch) -> AWSCloud:
        for key, value in support.CREDENTIALS.items():
            monkeypatch.setenv(key, value)
        return AWSCloud(load_aws_config(moto_world.cloud_config()))

    @pytest.fixture
    def lb_nodes(self, moto_world: Any) -> list[Node]:
        return [support.node_for(moto_world, i) for i in moto_world.instances]

    @pytest.fixture
    def known_node(self, moto_world: Any) -> Node:
        return support.node_for(moto_world, next(iter(moto_world.instances)))
