"""The vSphere cloud config: the CPI's INI and YAML keys, defaults and errors."""

from __future__ import annotations

import ipaddress

import pytest

from kccm.cloudprovider import CloudConfigError
from kccm.providers.vsphere.config import load_vsphere_config
from kccm.providers.vsphere.configtypes import GLOBAL_SECRET_REF, VCenter

INI_TWO = """
[Global]
user = admin
password = s3cret
port = 8443
insecure-flag = true
datacenters = dc1, dc2

[VirtualCenter "vc1.example.com"]

[VirtualCenter "tenant-b"]
server = 10.0.0.5
user = other
password = pw2
port = 443
datacenters = dcB
ip-family = ipv4
soap-roundtrip-count = 5

[Labels]
zone = k8s-zone
region = k8s-region

[Nodes]
internal-network-subnet-cidr = 192.168.0.0/16
external-vm-network-name = External
exclude-internal-network-subnet-cidr = 192.168.99.0/24,192.168.98.0/24
"""

YAML_TWO = """
global:
  user: admin
  password: s3cret
  port: 8443
  insecureFlag: true
  datacenters: [dc1, dc2]
vcenter:
  vc1:
    server: vc1.example.com
  tenant-b:
    server: 10.0.0.5
    user: other
    password: pw2
    port: 443
    datacenters:
      - dcB
    ipFamily: [ipv4]
    soapRoundtripCount: 5
labels:
  zone: k8s-zone
  region: k8s-region
nodes:
  internalNetworkSubnetCidr: 192.168.0.0/16
  externalVmNetworkName: External
  excludeInternalNetworkSubnetCidr: 192.168.99.0/24,192.168.98.0/24
"""


@pytest.mark.parametrize(
    ("text", "first"), [(INI_TWO, "vc1.example.com"), (YAML_TWO, "vc1")], ids=["ini", "yaml"]
)
def test_both_formats_read_the_same_settings(text: str, first: str) -> None:
    config = load_vsphere_config(text)
    assert list(config.vcenters) == [first, "tenant-b"]
    vc1 = config.vcenters[first]
    assert vc1 == VCenter(
        tenant_ref=first,
        server="vc1.example.com",
        port=8443,
        user="admin",
        password="s3cret",
        insecure=True,
        datacenters=("dc1", "dc2"),
    )
    b = config.vcenters["tenant-b"]
    assert (b.server, b.port, b.user, b.datacenters, b.roundtrip_count, b.insecure) == (
        "10.0.0.5",
        443,
        "other",
        ("dcB",),
        5,
        True,  # upstream: a false insecure-flag falls back to [Global]'s
    )
    assert (config.zone_category, config.region_category) == ("k8s-zone", "k8s-region")
    assert config.zones_enabled
    assert config.nodes.internal_subnets == (ipaddress.ip_network("192.168.0.0/16"),)
    assert config.nodes.external_network_name == "External"
    assert len(config.nodes.exclude_internal_subnets) == 2


def test_global_server_makes_a_vcenter_with_the_defaults() -> None:
    config = load_vsphere_config("[Global]\nserver = vc\nuser = u\npassword = hunter2\n")
    vc = config.vcenters["vc"]
    assert (vc.port, vc.roundtrip_count, vc.ip_families, vc.insecure) == (443, 3, ("ipv4",), False)
    assert not config.zones_enabled
    assert "hunter2" not in repr(vc)


def test_secret_settings_choose_where_credentials_come_from() -> None:
    config = load_vsphere_config(
        "[Global]\nsecret-name = creds\nsecret-namespace = kube-system\n"
        '[VirtualCenter "a"]\n'
        '[VirtualCenter "b"]\nsecret-name = b-creds\nsecret-namespace = ns\n'
        '[VirtualCenter "c"]\n'
    )
    assert config.vcenters["a"].secret_ref == GLOBAL_SECRET_REF
    assert (config.vcenters["a"].secret_namespace, config.vcenters["a"].secret_name) == (
        "kube-system",
        "creds",
    )
    assert config.vcenters["b"].secret_ref == "ns/b-creds"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[Global]\nuser = u\n", "No Virtual Center hosts defined"),
        ('[VirtualCenter "vc"]\npassword = p\n', "Username is missing"),
        ('[VirtualCenter "vc"]\nuser = u\n', "Password is missing"),
        ("vcenter:\n  a:\n    user: u\n    password: p\n", "does not have the VirtualCenter IP"),
        ('[VirtualCenter "vc"]\nuser=u\npassword=p\nip-family = ipv5\n', "Invalid IP Family"),
        (
            '[VirtualCenter "vc"]\nuser=u\npassword=p\nip-family = ipv4,ipv6\n',
            "ENABLE_ALPHA_DUAL_STACK",
        ),
        (
            '[VirtualCenter "vc"]\nuser=u\npassword=p\n[Nodes]\ninternal-network-subnet-cidr = x\n',
            "is not a CIDR",
        ),
        ('[VirtualCenter "vc"]\nuser=u\npassword=p\nport = 70000\n', "is not a TCP port"),
        ('[VirtualCenter "vc"]\nuser=u\npassword=p\nbogus = 1\n', "unknown key"),
        (None, "no vSphere cloud provider config file given"),
    ],
    ids=[
        "no-vcenter",
        "no-user",
        "no-password",
        "yaml-no-server",
        "bad-ip-family",
        "dual-stack-gate",
        "bad-cidr",
        "bad-port",
        "unknown-key",
        "no-file",
    ],
)
def test_bad_configs_name_the_problem(text: str | None, message: str) -> None:
    with pytest.raises(CloudConfigError, match=message):
        load_vsphere_config(text, {})


def test_the_dual_stack_gate_is_read_from_the_given_environment() -> None:
    text = '[VirtualCenter "vc"]\nuser=u\npassword=p\nip-family = ipv6,ipv4\n'
    config = load_vsphere_config(text, {"ENABLE_ALPHA_DUAL_STACK": ""})
    assert config.vcenters["vc"].ip_families == ("ipv6", "ipv4")


NSXT_INI = """
[NSXT]
host = nsx.example.com
user = admin
password = nsx-secret
insecure-flag = true

[LoadBalancer]
size = SMALL
ip-pool-name = pool
tier1-gateway-path = /infra/tier-1s/t1

[LoadBalancerClass "public"]
ip-pool-name = public-pool

[Route]
router-path = /infra/tier-1s/t1
"""

NSXT_YAML = """
nsxt:
  host: nsx.example.com
  insecureFlag: true
loadBalancer:
  size: SMALL
  ipPoolName: pool
loadBalancerClass:
  public:
    ipPoolName: public-pool
route:
  routerPath: /infra/tier-1s/t1
"""


@pytest.mark.parametrize(
    ("text", "section"),
    [
        ('[VirtualCenter "vc"]\nuser = u\npassword = p\n' + NSXT_INI, "[NSXT]"),
        ("vcenter:\n  vc:\n    server: vc\n    user: u\n    password: p\n" + NSXT_YAML, "[Route]"),
    ],
    ids=["ini", "yaml"],
)
def test_nsxt_sections_of_a_cpi_config_load_and_are_reported_ignored(
    text: str, section: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Upstream reads them with its NSX-T readers from the same file; kccm has none."""
    config = load_vsphere_config(text, {})
    assert list(config.vcenters) == ["vc"]
    ignored = [r.getMessage() for r in caplog.records if "is ignored" in r.getMessage()]
    assert len(ignored) == 4
    assert any(section in message for message in ignored)
    assert not any("nsx-secret" in message for message in caplog.messages)


@pytest.mark.parametrize(
    "global_",
    [
        "secret-name = s\nsecret-namespace = ns\nsecrets-directory = /run/creds\n",
        "secret-name = s\n",
    ],
    ids=["secret-and-directory", "name-without-namespace"],
)
def test_half_or_double_secret_settings_load_as_upstream(
    global_: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Upstream's isSecretInfoProvided is then false: the vCenters' own credentials count."""
    config = load_vsphere_config(
        f'[Global]\n{global_}[VirtualCenter "vc"]\nuser=u\npassword=p\n', {}
    )
    assert (config.vcenters["vc"].secret_ref, config.vcenters["vc"].user) == ("", "u")
    assert "vsphere: [Global]" in caplog.text
    with pytest.raises(CloudConfigError, match="Username is missing"):
        load_vsphere_config(f'[Global]\n{global_}[VirtualCenter "vc"]\n', {})


def test_a_password_never_appears_in_errors() -> None:
    with pytest.raises(CloudConfigError) as err:
        load_vsphere_config('[VirtualCenter "vc"]\nuser = u\npassword = hunter2\nport = x\n')
    assert "hunter2" not in str(err.value)
