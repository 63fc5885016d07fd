"""The example provider passes the kccm conformance kit."""

from __future__ import annotations

import io

import pytest
from kccm_example_provider import ExampleCloud, new_cloud

from kccm.cloudprovider import Node
from kccm.testing.conformance import CloudProviderConformance, make_node


class TestExampleCloud(CloudProviderConformance):
    @pytest.fixture
    def cloud(self) -> ExampleCloud:
        return new_cloud(io.StringIO("[Global]\nmachines = node-a=10.0.0.1\n"))

    @pytest.fixture
    def known_node(self) -> Node:
        return make_node("node-a")
