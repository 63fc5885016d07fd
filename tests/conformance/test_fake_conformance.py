"""The fake provider passes the conformance kit, with every capability and with V2 only."""

from __future__ import annotations

import pytest

from kccm.cloudprovider import Node
from kccm.providers.fake import FakeCloud, FakeInstance
from kccm.testing.conformance import CloudProviderConformance, make_node


class TestFakeCloud(CloudProviderConformance):
    @pytest.fixture
    def cloud(self) -> FakeCloud:
        fake = FakeCloud()
        fake.add_instance(FakeInstance(name="known", instance_id="i-known"))
        return fake

    @pytest.fixture
    def known_node(self) -> Node:
        return make_node("known", provider_id="fake://i-known")


class TestFakeCloudWithoutLegacyInstances(TestFakeCloud):
    @pytest.fixture
    def cloud(self) -> FakeCloud:
        fake = FakeCloud(enable_instances=False, enable_zones=False)
        fake.add_instance(FakeInstance(name="known", instance_id="i-known"))
        return fake
