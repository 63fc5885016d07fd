"""Zone and region from tags on ancestor chains (upstream LookupZoneByMoref, zones.go)."""

from __future__ import annotations

import pytest

from kccm.cloudprovider import CloudProviderError, Zone
from kccm.providers.vsphere.inventory import VMInfo
from kccm.providers.vsphere.zones import pick_zone

LABELS = ("k8s-zone", "k8s-region")
TAGS = {
    "z-host": ("k8s-zone", "zone-host"),
    "z-cluster": ("k8s-zone", "zone-cluster"),
    "z-pool": ("k8s-zone", "zone-pool"),
    "z-folder": ("k8s-zone", "zone-folder"),
    "r-dc": ("k8s-region", "region-dc"),
    "other": ("unrelated", "x"),
}
HOST_CHAIN = (("HostSystem", "host-1"), ("ClusterComputeResource", "c-1"), ("Datacenter", "dc"))
POOL_CHAIN = (("ResourcePool", "rp-1"), ("ClusterComputeResource", "c-1"), ("Datacenter", "dc"))
VM_CHAIN = (("VirtualMachine", "vm-1"), ("Folder", "f-1"), ("Datacenter", "dc"))


def _vm() -> VMInfo:
    chains = (HOST_CHAIN, POOL_CHAIN, VM_CHAIN)
    return VMInfo("vc", "vm-1", "n", "u", "h", "poweredOn", "", 1, 1024, (), {}, "dc", chains)


@pytest.mark.parametrize(
    ("attached", "expected"),
    [
        ({"c-1": ["z-cluster"], "dc": ["r-dc"]}, Zone("zone-cluster", "region-dc")),
        # upstream overwrites the zone with each zone tag met until the region is found too
        (
            {"host-1": ["z-host"], "c-1": ["z-cluster"], "dc": ["r-dc"]},
            Zone("zone-cluster", "region-dc"),
        ),
        ({"host-1": ["z-host", "r-dc"], "c-1": ["z-cluster"]}, Zone("zone-host", "region-dc")),
        ({"rp-1": ["z-pool"], "dc": ["r-dc", "other"]}, Zone("zone-pool", "region-dc")),
        ({"f-1": ["z-folder"], "dc": ["r-dc"]}, Zone("zone-folder", "region-dc")),
    ],
    ids=[
        "cluster-zone-dc-region",
        "later-zone-overwrites-until-region-found",
        "walk-stops-once-both-found",
        "resource-pool-chain",
        "vm-folder-chain",
    ],
)
def test_chains_in_upstream_order(attached: dict[str, list[str]], expected: Zone) -> None:
    assert pick_zone(_vm(), attached, TAGS.__getitem__, LABELS) == expected


def test_a_chain_must_yield_both() -> None:
    with pytest.raises(CloudProviderError, match="no tag of category 'k8s-region'"):
        pick_zone(_vm(), {"c-1": ["z-cluster"]}, TAGS.__getitem__, LABELS)
