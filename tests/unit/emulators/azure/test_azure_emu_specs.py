"""The emulator's answers have the shapes of Azure's published REST API specs
(Azure/azure-rest-api-specs, vendored under tests/data/azure-specs) for the API versions upstream
v1.36.5 and kccm send: every answer of ``azure_spec_world.exercise`` is checked against the
definition the spec gives for it (``swagger_check``)."""

from __future__ import annotations

import copy
import re

import pytest
from azure_api import Api
from azure_spec_world import exercise
from swagger_check import load_specs

NETWORK = "2025-05-01"  # armnetwork/v9 v9.0.0, what upstream v1.36.5 and kccm send
COMPUTE = "2025-04-01"  # armcompute/v7 v7.3.0, likewise
VMSS_NETWORK = "2018-10-01"  # armnetwork/v9's pin for the scale-set NIC and public IP reads

# What live Azure answers beyond the spec, kept on purpose: upstream's own recordings of Azure
# (pkg/azclient/interfaceclient/testdata, v1.36.5; tests/unit/emulators/azure/azure_recorded.json)
# show a NIC with a top-level "kind" and "properties.allowPort25Out", neither of which
# networkInterface.json (2025-05-01) defines.
LIVE_AZURE_EXTRAS = (
    re.compile(r"^\$(\.value\[\d+\])?\.kind: not a property"),
    re.compile(r"^\$(\.value\[\d+\])?\.properties\.allowPort25Out: not a property"),
)

LB = "loadBalancer.json#/definitions/"
PIP = "publicIpAddress.json#/definitions/"
NIC = "networkInterface.json#/definitions/"
NSG = "networkSecurityGroup.json#/definitions/"
RT = "routeTable.json#/definitions/"
VNET = "virtualNetwork.json#/definitions/"
COMMON = "network.json#/definitions/"
VM = "virtualMachine.json#/definitions/"
VMSS = "virtualMachineScaleSet.json#/definitions/"
ASET = "availabilitySet.json#/definitions/"
CCOMMON = "common.json#/definitions/"

CASES = [
    # (answer, status, provider, api-version, definition)
    ("pip PUT", 201, "network", NETWORK, PIP + "PublicIPAddress"),
    ("pip GET", 200, "network", NETWORK, PIP + "PublicIPAddress"),
    ("pip list", 200, "network", NETWORK, PIP + "PublicIPAddressListResult"),
    ("lb PUT", 201, "network", NETWORK, LB + "LoadBalancer"),
    ("lb GET", 200, "network", NETWORK, LB + "LoadBalancer"),
    ("lb pool GET", 200, "network", NETWORK, LB + "BackendAddressPool"),
    ("internal lb PUT", 201, "network", NETWORK, LB + "LoadBalancer"),
    ("lb list", 200, "network", NETWORK, LB + "LoadBalancerListResult"),
    ("lb GET with members", 200, "network", NETWORK, LB + "LoadBalancer"),
    ("nic PUT", 200, "network", NETWORK, NIC + "NetworkInterface"),
    ("nic GET", 200, "network", NETWORK, NIC + "NetworkInterface"),
    ("nic list", 200, "network", NETWORK, NIC + "NetworkInterfaceListResult"),
    ("nsg PUT", 200, "network", NETWORK, NSG + "NetworkSecurityGroup"),
    ("nsg GET", 200, "network", NETWORK, NSG + "NetworkSecurityGroup"),
    ("nsg rule GET", 200, "network", NETWORK, NSG + "SecurityRule"),
    ("route table PUT", 200, "network", NETWORK, RT + "RouteTable"),
    ("route table GET", 200, "network", NETWORK, RT + "RouteTable"),
    ("route GET", 200, "network", NETWORK, RT + "Route"),
    ("vnet GET", 200, "network", NETWORK, VNET + "VirtualNetwork"),
    ("subnet GET", 200, "network", NETWORK, VNET + "Subnet"),
    ("network 404", 404, "network", NETWORK, COMMON + "CloudError"),
    ("network 400 api-version", 400, "network", NETWORK, COMMON + "CloudError"),
    ("network 412", 412, "network", NETWORK, COMMON + "CloudError"),
    ("network operation running", 200, "network", NETWORK, COMMON + "AzureAsyncOperationResult"),
    ("network operation done", 200, "network", NETWORK, COMMON + "AzureAsyncOperationResult"),
    ("vm GET", 200, "compute", COMPUTE, VM + "VirtualMachine"),
    ("vm GET instanceView", 200, "compute", COMPUTE, VM + "VirtualMachine"),
    ("vm instanceView GET", 200, "compute", COMPUTE, VM + "VirtualMachineInstanceView"),
    ("vm list", 200, "compute", COMPUTE, VM + "VirtualMachineListResult"),
    ("vm list filtered", 200, "compute", COMPUTE, VM + "VirtualMachineListResult"),
    ("availability set GET", 200, "compute", COMPUTE, ASET + "AvailabilitySet"),
    ("vmss GET", 200, "compute", COMPUTE, VMSS + "VirtualMachineScaleSet"),
    ("vmss list", 200, "compute", COMPUTE, VMSS + "VirtualMachineScaleSetListResult"),
    ("vmss vm list", 200, "compute", COMPUTE, VMSS + "VirtualMachineScaleSetVMListResult"),
    ("vmss vm GET", 200, "compute", COMPUTE, VMSS + "VirtualMachineScaleSetVM"),
    ("vmss PUT", 200, "compute", COMPUTE, VMSS + "VirtualMachineScaleSet"),
    ("vmss vm PUT", 200, "compute", COMPUTE, VMSS + "VirtualMachineScaleSetVM"),
    ("vmss nic GET", 200, "network", VMSS_NETWORK, NIC + "NetworkInterface"),
    ("vmss vm nic list", 200, "network", VMSS_NETWORK, NIC + "NetworkInterfaceListResult"),
    ("vmss nic list", 200, "network", VMSS_NETWORK, NIC + "NetworkInterfaceListResult"),
    ("vmss pip GET", 200, "network", VMSS_NETWORK, PIP + "PublicIPAddress"),
    ("vmss pip list", 200, "network", VMSS_NETWORK, PIP + "PublicIPAddressListResult"),
    ("compute 404", 404, "compute", COMPUTE, CCOMMON + "CloudError"),
    ("compute 400 api-version", 400, "compute", COMPUTE, CCOMMON + "CloudError"),
    ("compute 412", 412, "compute", COMPUTE, CCOMMON + "CloudError"),
]


def mismatches(body: object, provider: str, version: str, ref: str) -> list[str]:
    found = load_specs(provider, version).check(body, ref)
    return [e for e in found if not any(p.search(e) for p in LIVE_AZURE_EXTRAS)]


@pytest.mark.parametrize(
    ("name", "status", "provider", "version", "ref"), CASES, ids=[c[0] for c in CASES]
)
async def test_answer_follows_the_spec(
    api: Api, name: str, status: int, provider: str, version: str, ref: str
) -> None:
    answer = (await exercise(api))[name]
    assert answer.status == status, answer.body
    assert answer.body, name
    assert mismatches(answer.body, provider, version, ref) == []


GOOD_PIP = {
    "id": "/x/publicIPAddresses/p",
    "name": "p",
    "type": "Microsoft.Network/publicIPAddresses",
    "location": "eastus",
    "tags": {"a": "b"},
    "etag": 'W/"1"',
    "sku": {"name": "Standard", "tier": "Regional"},
    "properties": {
        "publicIPAllocationMethod": "Static",
        "idleTimeoutInMinutes": 4,
        "ipConfiguration": {"id": "/x/ipConfigurations/c"},
        "dnsSettings": {"domainNameLabelScope": "NoReuse"},
    },
}


@pytest.mark.parametrize(
    ("path", "value", "error"),
    [
        pytest.param(("properties", "surprise"), 1, "surprise: not a property", id="unknown-key"),
        pytest.param(("sku", "extra"), "x", "sku.extra: not a property", id="unknown-key-deep"),
        pytest.param(("properties", "idleTimeoutInMinutes"), "4", "is not integer", id="type"),
        pytest.param(("properties", "idleTimeoutInMinutes"), True, "is not integer", id="bool-int"),
        pytest.param(("tags", "a"), 1, "tags.a: int 1 is not string", id="additional-props"),
        pytest.param(
            ("properties", "dnsSettings", "domainNameLabelScope"),
            "Other",
            "is not one of",
            id="closed-enum",
        ),
        pytest.param(("properties", "ipAddress"), None, "null where", id="null"),
        pytest.param(
            ("properties", "natGateway"), {"id": "n"}, "natGateway.json", id="not-vendored"
        ),
    ],
)
def test_the_check_finds_a_broken_shape(path: tuple[str, ...], value: object, error: str) -> None:
    specs = load_specs("network", NETWORK)
    ref = PIP + "PublicIPAddress"
    assert specs.check(GOOD_PIP, ref) == []
    broken = copy.deepcopy(GOOD_PIP)
    target = broken
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert any(error in e for e in specs.check(broken, ref)), specs.errors


def test_an_extensible_enum_takes_any_string() -> None:
    body = copy.deepcopy(GOOD_PIP)
    body["sku"]["name"] = "StandardV3"
    assert load_specs("network", NETWORK).check(body, PIP + "PublicIPAddress") == []
