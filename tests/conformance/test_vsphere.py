"""The vsphere provider passes the conformance kit against vcsim (a real vSphere API)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kccm.cloudprovider import Node
from kccm.emulators.vsphere.vcsim import Vcsim
from kccm.providers.vsphere import VSphereCloud, new_vsphere_cloud
from kccm.testing.conformance import CloudProviderConformance, make_node


class TestVSphereCloud(CloudProviderConformance):
    @pytest.fixture
    def cloud(self, vcsim: Vcsim) -> Iterator[VSphereCloud]:
        cloud = new_vsphere_cloud(vcsim.ini_config())
        try:
            yield cloud
        finally:
            cloud.close()

    @pytest.fixture
    def known_node(self, vcsim: Vcsim) -> Node:
        return make_node(vcsim.hostname("DC0_C0_RP0_VM0"))
