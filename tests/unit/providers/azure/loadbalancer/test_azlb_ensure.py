"""The azure balancer against an in-memory ARM: what an ensure makes (named as upstream
names it), that an unchanged ensure writes nothing, that changes and drift are repaired, and
that a delete leaves nothing."""

from __future__ import annotations

from typing import Any

import pytest
from azlb_fake_arm import COMPUTE, NET, FakeArm, seed_network, seed_vm, seed_vmss, service, settings

from kccm.cloudprovider import InvalidServiceConfig
from kccm.providers.azure.loadbalancer import AzureLoadBalancers

CLUSTER = "kubernetes"
LB = f"{NET}/loadBalancers/kubernetes"
ILB = f"{NET}/loadBalancers/kubernetes-internal"
NSG = f"{NET}/networkSecurityGroups/nsg"
BASE = "a6f1b2c3d00004000800000000000000"
PIP = f"{NET}/publicIPAddresses/kubernetes-{BASE}"
POOL = f"{LB}/backendAddressPools/kubernetes"


@pytest.fixture
def arm() -> FakeArm:
    fake = FakeArm()
    seed_network(fake)
    return fake


@pytest.fixture
def nodes(arm: FakeArm) -> list[dict[str, Any]]:
    return [seed_vm(arm, "vm-0", "10.0.1.4"), seed_vm(arm, "vm-1", "10.0.1.5")]


def _lbs(arm: FakeArm, **changes: Any) -> AzureLoadBalancers:
    return AzureLoadBalancers(arm, settings(**changes))


def _names(body: dict[str, Any], key: str) -> list[str]:
    return [item["name"] for item in body["properties"].get(key) or ()]


def _nic_pools(arm: FakeArm, vm: str) -> list[str]:
    nic = arm.resource(f"{NET}/networkInterfaces/{vm}-nic")
    config = nic["properties"]["ipConfigurations"][0]["properties"]
    return [p["id"] for p in config.get("loadBalancerBackendAddressPools") or ()]


def _nsg_rules(arm: FakeArm) -> dict[str, dict[str, Any]]:
    rules = arm.resource(NSG)["properties"]["securityRules"]
    return {rule["name"]: rule["properties"] for rule in rules}


def test_create_makes_what_upstream_makes(arm: FakeArm, nodes: list[dict[str, Any]]) -> None:
    status = _lbs(arm).ensure_load_balancer(CLUSTER, service(), nodes)
    pip = arm.resource(PIP)
    assert [i.ip for i in status.ingress] == [pip["properties"]["ipAddress"]]
    assert pip["tags"] == {"k8s-azure-service": "default/web", "k8s-azure-cluster-name": CLUSTER}
    assert pip["sku"] == {"name": "Standard"}
    lb = arm.resource(LB)
    assert lb["sku"] == {"name": "Standard"}
    assert _names(lb, "frontendIPConfigurations") == [BASE]
    assert _names(lb, "backendAddressPools") == [CLUSTER]
    assert _names(lb, "probes") == [f"{BASE}-TCP-80"]
    assert _names(lb, "loadBalancingRules") == [f"{BASE}-TCP-80"]
    rule = lb["properties"]["loadBalancingRules"][0]["properties"]
    assert rule["enableFloatingIP"] is True
    assert rule["enableTcpReset"] is True
    assert rule["idleTimeoutInMinutes"] == 4
    assert rule["frontendPort"] == 80
    assert rule["probe"]["id"] == f"{LB}/probes/{BASE}-TCP-80"
    probe = lb["properties"]["probes"][0]["properties"]
    assert probe == {"port": 30080, "protocol": "Tcp", "intervalInSeconds": 5, "probeThreshold": 2}
    assert _nic_pools(arm, "vm-0") == [POOL]
    assert _nic_pools(arm, "vm-1") == [POOL]
    rules = _nsg_rules(arm)
    name = "k8s-azure-lb_allow_IPv4_d39272f7f57ed937951650d93992ad77"
    assert list(rules) == [name]
    assert rules[name]["sourceAddressPrefix"] == "Internet"
    assert rules[name]["destinationAddressPrefix"] == pip["properties"]["ipAddress"]
    assert rules[name]["destinationPortRanges"] == ["80"]
    assert rules[name]["priority"] == 500


def test_unchanged_ensure_writes_nothing(arm: FakeArm, nodes: list[dict[str, Any]]) -> None:
    lbs = _lbs(arm)
    first = lbs.ensure_load_balancer(CLUSTER, service(), nodes)
    arm.calls.clear()
    again = lbs.ensure_load_balancer(CLUSTER, service(), nodes)
    assert again == first
    assert arm.mutating() == []


def test_port_change_replaces_rule_probe_and_nsg_rule(
    arm: FakeArm, nodes: list[dict[str, Any]]
) -> None:
    lbs = _lbs(arm)
    lbs.ensure_load_balancer(CLUSTER, service(), nodes)
    lbs.ensure_load_balancer(CLUSTER, service(ports=(("TCP", 8080, 30081),)), nodes)
    lb = arm.resource(LB)
    assert _names(lb, "loadBalancingRules") == [f"{BASE}-TCP-8080"]
    assert _names(lb, "probes") == [f"{BASE}-TCP-8080"]
    rules = _nsg_rules(arm)
    assert [r["destinationPortRanges"] for r in rules.values()] == [["8080"]]


def test_nodes_join_and_leave_the_pool(arm: FakeArm, nodes: list[dict[str, Any]]) -> None:
    lbs = _lbs(arm)
    lbs.ensure_load_balancer(CLUSTER, service(), nodes[:1])
    assert _nic_pools(arm, "vm-0") == [POOL]
    assert _nic_pools(arm, "vm-1") == []
    lbs.update_load_balancer(CLUSTER, service(), nodes)
    assert _nic_pools(arm, "vm-1") == [POOL]
    lbs.update_load_balancer(CLUSTER, service(), nodes[1:])
    assert _nic_pools(arm, "vm-0") == []
    assert _nic_pools(arm, "vm-1") == [POOL]


def test_scale_set_vms_join_through_the_model(arm: FakeArm) -> None:
    vmss_nodes = seed_vmss(arm, "pool1", 2)
    _lbs(arm, vm_type="vmss").ensure_load_balancer(CLUSTER, service(), vmss_nodes)
    scale_set = arm.resource(f"{COMPUTE}/virtualMachineScaleSets/pool1")
    nic = scale_set["properties"]["virtualMachineProfile"]["networkProfile"]
    config = nic["networkInterfaceConfigurations"][0]["properties"]["ipConfigurations"][0]
    assert config["properties"]["loadBalancerBackendAddressPools"] == [{"id": POOL}]
    lb = arm.resource(LB)
    members = lb["properties"]["backendAddressPools"][0]["properties"]["backendIPConfigurations"]
    assert len(members) == 2


def test_source_ranges_make_their_own_rule_and_deny_all(
    arm: FakeArm, nodes: list[dict[str, Any]]
) -> None:
    deny = {"service.beta.kubernetes.io/azure-deny-all-except-load-balancer-source-ranges": "true"}
    svc = service(annotations=deny, loadBalancerSourceRanges=["10.0.0.0/8"])
    _lbs(arm).ensure_load_balancer(CLUSTER, svc, nodes)
    rules = _nsg_rules(arm)
    allow = "k8s-azure-lb_allow_IPv4_2e80b3cfd2a6a84924746e76e404cce0"
    assert sorted(rules) == sorted([allow, "k8s-azure-lb_deny-all_IPv4"])
    assert rules[allow]["sourceAddressPrefix"] == "10.0.0.0/8"
    assert rules["k8s-azure-lb_deny-all_IPv4"]["priority"] == 4095


def test_internal_service_uses_the_internal_balancer(
    arm: FakeArm, nodes: list[dict[str, Any]]
) -> None:
    internal = {"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}
    lbs = _lbs(arm)
    lbs.ensure_load_balancer(CLUSTER, service(), nodes)
    status = lbs.ensure_load_balancer(CLUSTER, service(annotations=internal), nodes)
    ilb = arm.resource(ILB)
    fip = ilb["properties"]["frontendIPConfigurations"][0]["properties"]
    assert [i.ip for i in status.ingress] == [fip["privateIPAddress"]]
    assert fip["subnet"]["id"].endswith("/subnets/nodes")
    assert LB.lower() not in arm.store
    assert PIP.lower() not in arm.store


def test_local_policy_probes_the_health_check_node_port(
    arm: FakeArm, nodes: list[dict[str, Any]]
) -> None:
    svc = service(externalTrafficPolicy="Local", healthCheckNodePort=32000)
    _lbs(arm).ensure_load_balancer(CLUSTER, svc, nodes)
    probe = arm.resource(LB)["properties"]["probes"][0]
    assert probe["name"] == f"{BASE}-TCP-32000"
    assert probe["properties"]["protocol"] == "Http"
    assert probe["properties"]["requestPath"] == "/healthz"


def test_delete_leaves_nothing(arm: FakeArm, nodes: list[dict[str, Any]]) -> None:
    lbs = _lbs(arm)
    lbs.ensure_load_balancer(CLUSTER, service(), nodes)
    lbs.ensure_load_balancer_deleted(CLUSTER, service())
    assert LB.lower() not in arm.store
    assert PIP.lower() not in arm.store
    assert _nsg_rules(arm) == {}
    assert _nic_pools(arm, "vm-0") == []
    assert _nic_pools(arm, "vm-1") == []
    assert lbs.get_load_balancer(CLUSTER, service()) == (None, False)


def test_drift_is_repaired(arm: FakeArm, nodes: list[dict[str, Any]]) -> None:
    lbs = _lbs(arm)
    lbs.ensure_load_balancer(CLUSTER, service(), nodes)
    lb = arm.resource(LB)
    lb["properties"]["loadBalancingRules"][0]["properties"]["frontendPort"] = 81
    arm.put(LB, lb, if_match=None)
    lbs.ensure_load_balancer(CLUSTER, service(), nodes)
    assert (
        arm.resource(LB)["properties"]["loadBalancingRules"][0]["properties"]["frontendPort"] == 80
    )


def test_upstreams_objects_are_adopted_without_writes(
    arm: FakeArm, nodes: list[dict[str, Any]]
) -> None:
    lbs = _lbs(arm)
    lbs.ensure_load_balancer(CLUSTER, service(), nodes)
    address = arm.resource(PIP)["properties"]["ipAddress"]
    adopter = _lbs(arm)
    arm.calls.clear()
    status = adopter.ensure_load_balancer(CLUSTER, service(), nodes)
    assert [i.ip for i in status.ingress] == [address]
    assert arm.mutating() == []


@pytest.mark.parametrize(
    "key",
    [
        "service.beta.kubernetes.io/azure-pls-create",
        "service.beta.kubernetes.io/azure-load-balancer-configurations",
        "service.beta.kubernetes.io/azure-pip-prefix-id",
    ],
)
def test_refused_annotation_fails_naming_it(
    arm: FakeArm, nodes: list[dict[str, Any]], key: str
) -> None:
    with pytest.raises(InvalidServiceConfig, match=key):
        _lbs(arm).ensure_load_balancer(CLUSTER, service(annotations={key: "x"}), nodes)
    assert arm.mutating() == []


OTHER = "99999999-0000-4000-8000-000000000009"


def test_deleting_one_service_keeps_the_others(arm: FakeArm, nodes: list[dict[str, Any]]) -> None:
    lbs = _lbs(arm)
    lbs.ensure_load_balancer(CLUSTER, service(), nodes)
    other = service(uid=OTHER, name="api", ports=(("TCP", 443, 30443),))
    kept = lbs.ensure_load_balancer(CLUSTER, other, nodes)
    lbs.ensure_load_balancer_deleted(CLUSTER, service())
    lb = arm.resource(LB)
    assert _names(lb, "frontendIPConfigurations") == ["a99999999000040008000000000000000"[:32]]
    assert _nic_pools(arm, "vm-0") == [POOL]
    rules = _nsg_rules(arm)
    assert [r["destinationAddressPrefix"] for r in rules.values()] == [kept.ingress[0].ip]
    assert lbs.get_load_balancer(CLUSTER, other) == (kept, True)


def test_a_users_public_ip_is_used_and_left_alone(
    arm: FakeArm, nodes: list[dict[str, Any]]
) -> None:
    mine = f"{NET}/publicIPAddresses/my-ip"
    arm.seed(
        mine,
        {
            "location": "westus",
            "sku": {"name": "Standard"},
            "tags": {"owner": "me"},
            "properties": {
                "ipAddress": "20.1.2.3",
                "publicIPAddressVersion": "IPv4",
                "publicIPAllocationMethod": "Static",
            },
        },
    )
    svc = service(annotations={"service.beta.kubernetes.io/azure-pip-name": "my-ip"})
    lbs = _lbs(arm)
    status = lbs.ensure_load_balancer(CLUSTER, svc, nodes)
    assert [i.ip for i in status.ingress] == ["20.1.2.3"]
    assert ("PUT", mine) not in arm.calls
    lbs.ensure_load_balancer_deleted(CLUSTER, svc)
    assert arm.resource(mine)["tags"] == {"owner": "me"}
    assert LB.lower() not in arm.store


def test_basic_sku(arm: FakeArm, nodes: list[dict[str, Any]]) -> None:
    _lbs(arm, load_balancer_sku="basic").ensure_load_balancer(CLUSTER, service(), nodes)
    assert arm.resource(LB)["sku"] == {"name": "Basic"}
    assert "sku" not in arm.resource(PIP)
    rule = arm.resource(LB)["properties"]["loadBalancingRules"][0]["properties"]
    assert "enableTcpReset" not in rule


def test_dns_label_and_pip_tags(arm: FakeArm, nodes: list[dict[str, Any]]) -> None:
    svc = service(
        annotations={
            "service.beta.kubernetes.io/azure-dns-label-name": "web",
            "service.beta.kubernetes.io/azure-pip-tags": "team=a",
        }
    )
    lbs = _lbs(arm)
    lbs.ensure_load_balancer(CLUSTER, svc, nodes)
    pip = arm.resource(PIP)
    assert pip["properties"]["dnsSettings"] == {"domainNameLabel": "web"}
    assert pip["tags"]["k8s-azure-dns-label-service"] == "default/web"
    assert pip["tags"]["team"] == "a"
    arm.calls.clear()
    lbs.ensure_load_balancer(CLUSTER, svc, nodes)
    assert arm.mutating() == []


@pytest.mark.parametrize(
    "labels",
    [
        {"node-role.kubernetes.io/control-plane": ""},
        {"kubernetes.azure.com/resource-group": "elsewhere"},
        {"kubernetes.azure.com/managed": "false"},
        {"node.kubernetes.io/exclude-from-external-load-balancers": ""},
    ],
    ids=["control-plane", "other-resource-group", "unmanaged", "exclude-label"],
)
def test_excluded_nodes_stay_out_of_the_pool(
    arm: FakeArm, nodes: list[dict[str, Any]], labels: dict[str, str]
) -> None:
    nodes[1]["metadata"]["labels"] = labels
    _lbs(arm).ensure_load_balancer(CLUSTER, service(), nodes)
    assert _nic_pools(arm, "vm-0") == [POOL]
    assert _nic_pools(arm, "vm-1") == []


def test_explain_names_why_a_node_is_left_out(arm: FakeArm, nodes: list[dict[str, Any]]) -> None:
    nodes[1]["metadata"]["labels"] = {"kubernetes.azure.com/managed": "false"}
    why = _lbs(arm).backend_node_exclusion(service())
    assert why(nodes[0]) is None
    assert why(nodes[1]) == "label kubernetes.azure.com/managed=false"
    assert arm.calls == []


def test_another_services_public_ip_is_not_shared(
    arm: FakeArm, nodes: list[dict[str, Any]]
) -> None:
    lbs = _lbs(arm)
    address = lbs.ensure_load_balancer(CLUSTER, service(), nodes).ingress[0].ip
    other = service(uid=OTHER, name="api", loadBalancerIP=address)
    with pytest.raises(InvalidServiceConfig, match="does not share a public IP"):
        lbs.ensure_load_balancer(CLUSTER, other, nodes)


def test_high_availability_ports(arm: FakeArm, nodes: list[dict[str, Any]]) -> None:
    svc = service(
        annotations={
            "service.beta.kubernetes.io/azure-load-balancer-internal": "true",
            "service.beta.kubernetes.io/azure-load-balancer-enable-high-availability-ports": "true",
        },
        ports=(("TCP", 80, 30080), ("UDP", 53, 30053)),
    )
    _lbs(arm).ensure_load_balancer(CLUSTER, svc, nodes)
    (rule,) = arm.resource(ILB)["properties"]["loadBalancingRules"]
    assert rule["name"] == f"{BASE}-TCP-80"
    props = rule["properties"]
    assert (props["protocol"], props["frontendPort"], props["backendPort"]) == ("All", 0, 0)
    assert props["probe"]["id"].endswith(f"/probes/{BASE}-TCP-80")


def test_floating_ip_off_targets_node_ports_and_node_addresses(
    arm: FakeArm, nodes: list[dict[str, Any]]
) -> None:
    svc = service(
        annotations={"service.beta.kubernetes.io/azure-disable-load-balancer-floating-ip": "true"}
    )
    lbs = _lbs(arm)
    lbs.ensure_load_balancer(CLUSTER, svc, nodes)
    props = arm.resource(LB)["properties"]["loadBalancingRules"][0]["properties"]
    assert (props["backendPort"], props["enableFloatingIP"]) == (30080, False)
    (rule,) = _nsg_rules(arm).values()
    assert rule["destinationAddressPrefixes"] == ["10.0.1.4", "10.0.1.5"]
    assert rule["destinationPortRanges"] == ["30080"]
    lbs.ensure_load_balancer_deleted(CLUSTER, svc)
    assert _nsg_rules(arm) == {}


def test_internal_subnet_names_the_frontend(arm: FakeArm, nodes: list[dict[str, Any]]) -> None:
    arm.seed(
        f"{NET}/virtualNetworks/vnet/subnets/apps", {"properties": {"addressPrefix": "10.5.0.0/16"}}
    )
    svc = service(
        annotations={
            "service.beta.kubernetes.io/azure-load-balancer-internal": "true",
            "service.beta.kubernetes.io/azure-load-balancer-internal-subnet": "apps",
        },
        loadBalancerIP="10.5.0.9",
    )
    status = _lbs(arm).ensure_load_balancer(CLUSTER, svc, nodes)
    assert [i.ip for i in status.ingress] == ["10.5.0.9"]
    ilb = arm.resource(ILB)["properties"]
    assert _names({"properties": ilb}, "frontendIPConfigurations") == [f"{BASE}-apps"]
    assert _names({"properties": ilb}, "loadBalancingRules") == [f"{BASE}-apps-TCP-80"]


def test_describe_shows_the_services_rules_and_the_pool(
    arm: FakeArm, nodes: list[dict[str, Any]]
) -> None:
    lbs = _lbs(arm)
    assert lbs.describe_load_balancer(CLUSTER, service()) is None
    status = lbs.ensure_load_balancer(CLUSTER, service(), nodes)
    view = lbs.describe_load_balancer(CLUSTER, service())
    assert view is not None
    assert (view.name, view.state, view.detail["address"]) == (
        CLUSTER,
        "Succeeded",
        status.ingress[0].ip,
    )
    (listener,) = view.listeners
    assert (listener.port, listener.protocol) == (80, "TCP")
    assert sorted(t.instance for t in listener.targets) == ["vm-0-nic", "vm-1-nic"]


def test_shared_probe_mode(arm: FakeArm, nodes: list[dict[str, Any]]) -> None:
    lbs = _lbs(arm, shared_probe=True)
    other = service(uid=OTHER, name="api", ports=(("TCP", 443, 30443),))
    lbs.ensure_load_balancer(CLUSTER, service(), nodes)
    lbs.ensure_load_balancer(CLUSTER, other, nodes)
    lb = arm.resource(LB)["properties"]
    assert [p["name"] for p in lb["probes"]] == ["cluster-service-shared-health-probe"]
    probe = lb["probes"][0]["properties"]
    assert (probe["port"], probe["requestPath"], probe["protocol"]) == (10256, "/healthz", "Http")
    assert {r["properties"]["probe"]["id"] for r in lb["loadBalancingRules"]} == {
        f"{LB}/probes/cluster-service-shared-health-probe"
    }
    lbs.ensure_load_balancer_deleted(CLUSTER, service())
    lb = arm.resource(LB)["properties"]
    assert [p["name"] for p in lb["probes"]] == ["cluster-service-shared-health-probe"]
    local = service(
        uid=OTHER,
        name="api",
        ports=(("TCP", 443, 30443),),
        externalTrafficPolicy="Local",
        healthCheckNodePort=32001,
    )
    lbs.ensure_load_balancer(CLUSTER, local, nodes)
    lb = arm.resource(LB)["properties"]
    assert [p["name"] for p in lb["probes"]] == [
        "a99999999000040008000000000000000"[:32] + "-TCP-32001"
    ]


@pytest.mark.parametrize(
    ("sku", "primary", "joined"),
    [
        ("basic", "as1", ["vm-0"]),
        ("basic", "", ["vm-0", "vm-1"]),
        ("standard", "as1", ["vm-0", "vm-1"]),
    ],
    ids=["basic-primary-set-only", "basic-no-primary-set", "standard-every-set"],
)
def test_basic_balancer_takes_the_primary_availability_set(
    arm: FakeArm, nodes: list[dict[str, Any]], sku: str, primary: str, joined: list[str]
) -> None:
    for vm, aset in (("vm-0", "as1"), ("vm-1", "as2")):
        body = arm.store[f"{COMPUTE}/virtualMachines/{vm}".lower()]
        body["properties"]["availabilitySet"] = {"id": f"{COMPUTE}/availabilitySets/{aset}"}
    lbs = _lbs(arm, load_balancer_sku=sku, primary_vm_set=primary)
    lbs.ensure_load_balancer(CLUSTER, service(), nodes)
    assert [vm for vm in ("vm-0", "vm-1") if _nic_pools(arm, vm)] == joined


def test_new_standard_public_ip_and_internal_frontend_get_the_regions_zones(
    arm: FakeArm, nodes: list[dict[str, Any]]
) -> None:
    lbs = AzureLoadBalancers(arm, settings(), zones=lambda: ["1", "2", "3"])
    lbs.ensure_load_balancer(CLUSTER, service(), nodes)
    assert arm.resource(PIP)["zones"] == ["1", "2", "3"]
    internal = {"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}
    lbs.ensure_load_balancer(CLUSTER, service(uid=OTHER, name="api", annotations=internal), nodes)
    assert arm.resource(ILB)["properties"]["frontendIPConfigurations"][0]["zones"] == [
        "1",
        "2",
        "3",
    ]
    arm.calls.clear()
    lbs.ensure_load_balancer(CLUSTER, service(), nodes)
    assert arm.mutating() == []


@pytest.mark.parametrize("families", [["IPv6"], ["IPv4", "IPv6"]], ids=["ipv6", "dual-stack"])
def test_ipv6_and_dual_stack_are_refused(
    arm: FakeArm, nodes: list[dict[str, Any]], families: list[str]
) -> None:
    with pytest.raises(InvalidServiceConfig, match="IPv4 only"):
        _lbs(arm).ensure_load_balancer(CLUSTER, service(ipFamilies=families), nodes)
    assert arm.mutating() == []


def test_drift_of_the_security_group_and_the_pool_is_repaired(
    arm: FakeArm, nodes: list[dict[str, Any]]
) -> None:
    lbs = _lbs(arm)
    lbs.ensure_load_balancer(CLUSTER, service(), nodes)
    nsg = arm.resource(NSG)
    nsg["properties"]["securityRules"] = []
    arm.put(NSG, nsg, if_match=None)
    nic_path = f"{NET}/networkInterfaces/vm-1-nic"
    nic = arm.resource(nic_path)
    nic["properties"]["ipConfigurations"][0]["properties"]["loadBalancerBackendAddressPools"] = []
    arm.put(nic_path, nic, if_match=None)
    arm.calls.clear()
    lbs.ensure_load_balancer(CLUSTER, service(), nodes)
    assert sorted(call for call in arm.mutating()) == sorted([("PUT", NSG), ("PUT", nic_path)])
    assert len(_nsg_rules(arm)) == 1
    assert _nic_pools(arm, "vm-1") == [POOL]


def test_public_ips_of_both_resource_groups_are_released(
    arm: FakeArm, nodes: list[dict[str, Any]]
) -> None:
    """As upstream: after the annotation moves the public IP to another resource group the
    old one (same name) stays until the Service goes; then both go."""
    lbs = _lbs(arm)
    lbs.ensure_load_balancer(CLUSTER, service(), nodes)
    group = "service.beta.kubernetes.io/azure-load-balancer-resource-group"
    moved = service(annotations={group: "ips"})
    lbs.ensure_load_balancer(CLUSTER, moved, nodes)
    new = PIP.replace("/resourceGroups/rg/", "/resourceGroups/ips/")
    assert new.lower() in arm.store
    lbs.ensure_load_balancer_deleted(CLUSTER, moved)
    assert new.lower() not in arm.store
    assert PIP.lower() not in arm.store
