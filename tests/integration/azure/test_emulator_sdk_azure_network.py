"""The Azure SDK for Python (azure-mgmt-network) drives the emulator's Microsoft.Network
through every call kind the provider makes: public IPs (static addresses from the pool,
long-running PUT/DELETE polled), a load balancer with its frontend, pool, probe and rule
(create, read, list in pages, update with If-Match, a stale ETag's 412), NIC pool membership,
security rules, route tables and routes, subnets; ARM's errors parsed by the SDK."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.core.polling import LROPoller
from azure.mgmt.network import NetworkManagementClient
from azure.mgmt.network import models as m
from azure_sdk_support import leaves_nothing, network_client

from kccm.emulators.azure import AzureEmulator, azure_emulator
from kccm.testing.certs import emulator_tls

RG = "kccm-rg"


@pytest.fixture(scope="module")
def emu() -> Iterator[AzureEmulator]:
    with azure_emulator(tls=emulator_tls()) as emulator:
        yield emulator


@pytest.fixture(scope="module")
def network(emu: AzureEmulator) -> Iterator[NetworkManagementClient]:
    with network_client(emu) as client:
        yield client


@pytest.fixture(autouse=True)
def clean(emu: AzureEmulator) -> Iterator[None]:
    yield from leaves_nothing(emu)


def ids(emu: AzureEmulator) -> tuple[str, str]:
    conf = emu.config
    group = f"/subscriptions/{conf['subscription']}/resourceGroups/{RG}"
    return group, f"{group}/providers/Microsoft.Network/loadBalancers/kubernetes"


def make_pip(network: NetworkManagementClient, name: str = "kubernetes-a") -> m.PublicIPAddress:
    body = m.PublicIPAddress(
        location="eastus",
        sku=m.PublicIPAddressSku(name="Standard"),
        public_ip_allocation_method="Static",
        public_ip_address_version="IPv4",
        tags={"k8s-azure-service": "default/web"},
    )
    return network.public_ip_addresses.begin_create_or_update(RG, name, body).result()


def make_lb(
    network: NetworkManagementClient, emu: AzureEmulator, pip: m.PublicIPAddress
) -> m.LoadBalancer:
    _, lb = ids(emu)
    body = m.LoadBalancer(
        location="eastus",
        sku=m.LoadBalancerSku(name="Standard"),
        frontend_ip_configurations=[
            m.FrontendIPConfiguration(name="a", public_ip_address=m.PublicIPAddress(id=pip.id))
        ],
        backend_address_pools=[m.BackendAddressPool(name="kubernetes")],
        probes=[
            m.Probe(
                name="a-TCP-80",
                protocol="Tcp",
                port=30080,
                interval_in_seconds=5,
                number_of_probes=2,
            )
        ],
        load_balancing_rules=[
            m.LoadBalancingRule(
                name="a-TCP-80",
                protocol="Tcp",
                frontend_port=80,
                backend_port=80,
                frontend_ip_configuration=m.SubResource(id=f"{lb}/frontendIPConfigurations/a"),
                backend_address_pool=m.SubResource(id=f"{lb}/backendAddressPools/kubernetes"),
                probe=m.SubResource(id=f"{lb}/probes/a-TCP-80"),
                enable_floating_ip=True,
                idle_timeout_in_minutes=4,
            )
        ],
    )
    return network.load_balancers.begin_create_or_update(RG, "kubernetes", body).result()


def test_a_static_public_ip_gets_an_address_and_goes(
    emu: AzureEmulator, network: NetworkManagementClient
) -> None:
    emu.admin.set_config(lro_delay=0.2)
    since = emu.admin.last_seq()
    pip = make_pip(network)
    assert pip.ip_address
    assert pip.provisioning_state == "Succeeded"
    assert pip.tags == {"k8s-azure-service": "default/web"}
    network.public_ip_addresses.begin_delete(RG, "kubernetes-a").result()
    with pytest.raises(ResourceNotFoundError):
        network.public_ip_addresses.get(RG, "kubernetes-a")
    ops = [r["op"] for r in emu.admin.requests(since)]
    assert "GET Microsoft.Network/locations/{}/operations/{}" in ops
    assert ops.count("DELETE Microsoft.Network/publicIPAddresses/{}") == 1


def test_a_balancer_with_a_rule_and_nic_members(
    emu: AzureEmulator, network: NetworkManagementClient
) -> None:
    vm = emu.admin.add_vm("node-lb")
    pip = make_pip(network)
    lb = make_lb(network, emu, pip)
    assert lb.frontend_ip_configurations[0].public_ip_address.id == pip.id
    assert lb.load_balancing_rules[0].probe.id.endswith("/probes/a-TCP-80")
    nic = network.network_interfaces.get(RG, "node-lb-nic")
    nic.ip_configurations[0].load_balancer_backend_address_pools = [
        m.BackendAddressPool(id=lb.backend_address_pools[0].id)
    ]
    network.network_interfaces.begin_create_or_update(RG, "node-lb-nic", nic).result()
    found = network.load_balancers.get(RG, "kubernetes")
    members = found.backend_address_pools[0].backend_ip_configurations
    assert [c.id for c in members] == [nic.ip_configurations[0].id]
    assert found.frontend_ip_configurations[0].load_balancing_rules[0].id.endswith("/a-TCP-80")
    assert network.public_ip_addresses.get(RG, pip.name).ip_configuration.id.endswith(
        "/frontendIPConfigurations/a"
    )
    nic = network.network_interfaces.get(RG, "node-lb-nic")
    nic.ip_configurations[0].load_balancer_backend_address_pools = []
    network.network_interfaces.begin_create_or_update(RG, "node-lb-nic", nic).result()
    network.load_balancers.begin_delete(RG, "kubernetes").result()
    network.public_ip_addresses.begin_delete(RG, pip.name).result()
    emu.admin.delete_vm(vm["id"])


def test_an_update_with_a_stale_etag_is_412(
    emu: AzureEmulator, network: NetworkManagementClient
) -> None:
    pip = make_pip(network)
    lb = make_lb(network, emu, pip)
    stale = lb.etag
    lb.probes[0].interval_in_seconds = 10
    updated = network.load_balancers.begin_create_or_update(
        RG, "kubernetes", lb, headers={"If-Match": stale}
    ).result()
    assert updated.probes[0].interval_in_seconds == 10
    assert updated.etag != stale
    with pytest.raises(HttpResponseError) as caught:
        network.load_balancers.begin_create_or_update(
            RG, "kubernetes", lb, headers={"If-Match": stale}
        ).result()
    assert caught.value.status_code == 412
    assert caught.value.error is not None
    assert caught.value.error.code == "PreconditionFailed"
    network.load_balancers.begin_delete(RG, "kubernetes").result()
    network.public_ip_addresses.begin_delete(RG, pip.name).result()


def test_public_ips_are_listed_in_pages(
    emu: AzureEmulator, network: NetworkManagementClient
) -> None:
    emu.admin.set_config(page_size=2)
    made = [make_pip(network, f"kubernetes-{i}") for i in range(5)]
    since = emu.admin.last_seq()
    assert [p.name for p in network.public_ip_addresses.list(RG)] == [p.name for p in made]
    assert (
        sum(r["op"] == "GET Microsoft.Network/publicIPAddresses" for r in emu.admin.requests(since))
        == 3
    )
    pollers: list[LROPoller[None]] = [
        network.public_ip_addresses.begin_delete(RG, p.name) for p in made
    ]
    for poller in pollers:
        poller.result()


@pytest.mark.parametrize(
    ("pool", "code"),
    [
        pytest.param(
            "loadBalancers/none/backendAddressPools/kubernetes",
            "InvalidResourceReference",
            id="missing-pool",
        ),
    ],
)
def test_a_nic_naming_a_missing_pool_is_refused(
    emu: AzureEmulator, network: NetworkManagementClient, pool: str, code: str
) -> None:
    vm = emu.admin.add_vm("node-bad")
    group, _ = ids(emu)
    nic = network.network_interfaces.get(RG, "node-bad-nic")
    nic.ip_configurations[0].load_balancer_backend_address_pools = [
        m.BackendAddressPool(id=f"{group}/providers/Microsoft.Network/{pool}")
    ]
    with pytest.raises(HttpResponseError) as caught:
        network.network_interfaces.begin_create_or_update(RG, "node-bad-nic", nic).result()
    assert caught.value.status_code == 400
    assert caught.value.error is not None
    assert caught.value.error.code == code
    emu.admin.delete_vm(vm["id"])


def test_security_rules_on_the_clusters_group(network: NetworkManagementClient) -> None:
    nsg = network.network_security_groups.get(RG, "kccm-nsg")
    nsg.security_rules = [
        m.SecurityRule(
            name="k8s-azure-lb_allow_IPv4_abc",
            protocol="Tcp",
            access="Allow",
            direction="Inbound",
            priority=500,
            source_address_prefix="Internet",
            source_port_range="*",
            destination_address_prefixes=["20.60.0.9"],
            destination_port_ranges=["80"],
        )
    ]
    updated = network.network_security_groups.begin_create_or_update(
        RG, "kccm-nsg", nsg, headers={"If-Match": nsg.etag}
    ).result()
    assert [r.name for r in updated.security_rules] == ["k8s-azure-lb_allow_IPv4_abc"]
    assert len(updated.default_security_rules) == 6
    network.security_rules.begin_delete(RG, "kccm-nsg", "k8s-azure-lb_allow_IPv4_abc").result()
    assert network.network_security_groups.get(RG, "kccm-nsg").security_rules == []


def test_routes_on_the_clusters_route_table(network: NetworkManagementClient) -> None:
    route = m.Route(
        address_prefix="10.244.0.0/24",
        next_hop_type="VirtualAppliance",
        next_hop_ip_address="10.240.0.4",
    )
    made = network.routes.begin_create_or_update(RG, "kccm-rt", "node-0", route).result()
    assert made.next_hop_ip_address == "10.240.0.4"
    table = network.route_tables.get(RG, "kccm-rt")
    assert [r.name for r in table.routes] == ["node-0"]
    table.routes.append(
        m.Route(
            name="node-1",
            address_prefix="10.244.1.0/24",
            next_hop_type="VirtualAppliance",
            next_hop_ip_address="10.240.0.5",
        )
    )
    network.route_tables.begin_create_or_update(
        RG, "kccm-rt", table, headers={"If-Match": table.etag}
    ).result()
    assert sorted(r.name for r in network.routes.list(RG, "kccm-rt")) == ["node-0", "node-1"]
    for name in ("node-0", "node-1"):
        network.routes.begin_delete(RG, "kccm-rt", name).result()
    assert network.route_tables.get(RG, "kccm-rt").routes == []


def test_subnets(network: NetworkManagementClient) -> None:
    subnet = network.subnets.get(RG, "kccm-vnet", "kccm-subnet")
    assert subnet.address_prefix == "10.240.0.0/16"
    assert subnet.network_security_group.id.endswith("/kccm-nsg")
    assert subnet.route_table.id.endswith("/kccm-rt")
    vnet = network.virtual_networks.get(RG, "kccm-vnet")
    assert [s.name for s in vnet.subnets] == ["kccm-subnet"]


def test_children_with_endpoints_of_their_own(
    emu: AzureEmulator, network: NetworkManagementClient
) -> None:
    pip = make_pip(network)
    make_lb(network, emu, pip)
    pools = network.load_balancer_backend_address_pools
    pools.begin_create_or_update(RG, "kubernetes", "outbound", m.BackendAddressPool()).result()
    assert sorted(p.name for p in pools.list(RG, "kubernetes")) == ["kubernetes", "outbound"]
    assert pools.get(RG, "kubernetes", "outbound").id.endswith("/backendAddressPools/outbound")
    pools.begin_delete(RG, "kubernetes", "outbound").result()
    rule = m.SecurityRule(
        protocol="Tcp",
        access="Allow",
        direction="Inbound",
        priority=600,
        source_address_prefix="*",
        source_port_range="*",
        destination_address_prefix="*",
        destination_port_range="443",
    )
    made = network.security_rules.begin_create_or_update(RG, "kccm-nsg", "allow-443", rule).result()
    assert made.priority == 600
    assert made.provisioning_state == "Succeeded"
    network.security_rules.begin_delete(RG, "kccm-nsg", "allow-443").result()
    vnet = network.virtual_networks.get(RG, "kccm-vnet")
    vnet.address_space.address_prefixes.append("10.241.0.0/16")
    network.virtual_networks.begin_create_or_update(RG, "kccm-vnet", vnet).result()
    subnet = network.subnets.begin_create_or_update(
        RG, "kccm-vnet", "extra", m.Subnet(address_prefix="10.241.0.0/24")
    ).result()
    assert subnet.address_prefix == "10.241.0.0/24"
    network.subnets.begin_delete(RG, "kccm-vnet", "extra").result()
    vnet = network.virtual_networks.get(RG, "kccm-vnet")
    vnet.address_space.address_prefixes.remove("10.241.0.0/16")
    network.virtual_networks.begin_create_or_update(RG, "kccm-vnet", vnet).result()
    network.load_balancers.begin_delete(RG, "kubernetes").result()
    network.public_ip_addresses.begin_delete(RG, pip.name).result()
