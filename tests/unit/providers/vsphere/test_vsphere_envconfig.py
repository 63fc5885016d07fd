"""``VSPHERE_*`` environment overrides (upstream ``FromEnv`` / ``FromCPIEnv``), read through the
``environ`` seam: no test touches the process environment."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

import pytest

from kccm.cloudprovider import CloudConfigError
from kccm.providers.vsphere.config import load_vsphere_config
from kccm.providers.vsphere.configtypes import GLOBAL_SECRET_REF, NodesConfig, VSphereConfig
from kccm.providers.vsphere.credentials import CredentialStore
from kccm.providers.vsphere.envconfig import DEFAULT_SECRETS_DIRECTORY

FILE = """
[Global]
user = file-user
password = file-pw
port = 8443
datacenters = dc-file
ca-file = /file/ca.pem

[VirtualCenter "vc1"]
insecure-flag = true
"""

FILE_GLOBAL_SECRET = """
[Global]
secret-name = file-secret
secret-namespace = file-ns

[VirtualCenter "vc1"]
"""

FILE_OWN_CREDS = """
[VirtualCenter "vc1"]
user = u
password = p
"""


def load(env: dict[str, str], text: str = FILE, *, exists: bool = False) -> VSphereConfig:
    return load_vsphere_config(text, env, path_exists=lambda _path: exists)


def net(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(text)


Check = Callable[[VSphereConfig], object]


def vcenter(name: str, *attrs: str) -> Check:
    """The check reading ``attrs`` of the vCenter ``name``, in that order."""
    return lambda c: tuple(getattr(c.vcenters[name], attr) for attr in attrs)


CASES: list[tuple[str, str, dict[str, str], Check, object]] = [
    ("no-variables-keep-the-file", FILE, {}, lambda c: list(c.vcenters), ["vc1"]),
    (
        "global-credentials-do-not-change-a-file-vcenter",
        FILE,
        {"VSPHERE_USER": "env-user", "VSPHERE_PASSWORD": "env-pw", "VSPHERE_VCENTER": "vc9"},
        lambda c: (list(c.vcenters), c.vcenters["vc1"].user, c.vcenters["vc1"].password),
        (["vc1"], "file-user", "file-pw"),
    ),
    (
        "vcenter-id-adds-a-vcenter-with-the-file-global-defaults",
        FILE,
        {"VSPHERE_VCENTER_A": "vc2"},
        vcenter("vc2", "server", "user", "port", "datacenters", "ca_file", "secret_ref"),
        ("vc2", "file-user", 8443, ("dc-file",), "/file/ca.pem", ""),
    ),
    (
        "global-variables-are-the-defaults-of-env-vcenters",
        FILE,
        {
            "VSPHERE_VCENTER_A": "vc2",
            "VSPHERE_USER": "env-user",
            "VSPHERE_PASSWORD": "env-pw",
            "VSPHERE_VCENTER_PORT": "9443",
            "VSPHERE_DATACENTER": "d1, d2",
            "VSPHERE_CAFILE": "/env/ca.pem",
            "VSPHERE_THUMBPRINT": "AB:CD",
        },
        vcenter("vc2", "user", "password", "port", "datacenters", "ca_file", "thumbprint"),
        ("env-user", "env-pw", 9443, ("d1", "d2"), "/env/ca.pem", "AB:CD"),
    ),
    (
        "per-vcenter-variables-win-over-the-global-ones",
        FILE,
        {
            "VSPHERE_VCENTER_A": "vc2",
            "VSPHERE_USER": "env-user",
            "VCENTER_A_USERNAME": "a-user",
            "VCENTER_A_PASSWORD": "a-pw",
            "VCENTER_A_PORT": "10443",
            "VCENTER_A_DATACENTERS": "dA",
            "VCENTER_A_CAFILE": "/a/ca.pem",
            "VCENTER_A_THUMBPRINT": "EF",
        },
        vcenter("vc2", "user", "password", "port", "datacenters", "ca_file", "thumbprint"),
        ("a-user", "a-pw", 10443, ("dA",), "/a/ca.pem", "EF"),
    ),
    (
        "same-name-replaces-the-whole-file-entry",
        FILE,
        {"VSPHERE_VCENTER_A": "vc1", "VCENTER_A_USERNAME": "x", "VCENTER_A_PASSWORD": "y"},
        lambda c: (list(c.vcenters), c.vcenters["vc1"].user, c.vcenters["vc1"].insecure),
        (["vc1"], "x", False),
    ),
    (
        "server-variable-makes-the-name-a-tenant",
        FILE,
        {"VSPHERE_VCENTER_A": "tenant-a", "VCENTER_A_SERVER": "10.0.0.9"},
        lambda c: (c.vcenters["tenant-a"].tenant_ref, c.vcenters["tenant-a"].server),
        ("tenant-a", "10.0.0.9"),
    ),
    (
        "own-secret-needs-name-and-namespace",
        FILE,
        {
            "VSPHERE_VCENTER_A": "vc2",
            "VCENTER_A_SECRET_NAME": "s",
            "VCENTER_A_SECRET_NAMESPACE": "ns",
            "VSPHERE_VCENTER_B": "vc3",
            "VCENTER_B_SECRET_NAME": "only-a-name",
        },
        lambda c: (c.vcenters["vc2"].secret_ref, c.vcenters["vc3"].secret_ref),
        ("ns/s", ""),
    ),
    (
        "insecure-roundtrip-and-ip-family-are-ignored-as-upstream",
        FILE,
        {
            "VSPHERE_VCENTER_A": "vc2",
            "VCENTER_A_INSECURE": "true",
            "VCENTER_A_ROUNDTRIP": "7",
            "VCENTER_A_IP_FAMILY": "ipv6",
            "VSPHERE_INSECURE": "true",
        },
        vcenter("vc2", "insecure", "roundtrip_count", "ip_families"),
        (False, 3, ("ipv4",)),
    ),
    (
        "vcenter-port-variable-is-no-vcenter",
        FILE,
        {"VSPHERE_VCENTER_PORT": "9443"},
        lambda c: (list(c.vcenters), c.vcenters["vc1"].port),
        (["vc1"], 8443),
    ),
    (
        "labels",
        FILE,
        {"VSPHERE_LABEL_ZONE": "z-cat", "VSPHERE_LABEL_REGION": "r-cat"},
        lambda c: (c.zone_category, c.region_category, c.zones_enabled),
        ("z-cat", "r-cat", True),
    ),
    (
        "nodes",
        FILE,
        {
            "VSPHERE_NODES_INTERNAL_NETWORK_SUBNET_CIDR": "10.0.0.0/8,fd00::/64",
            "VSPHERE_NODES_EXTERNAL_NETWORK_SUBNET_CIDR": "192.168.0.0/16",
            "VSPHERE_NODES_INTERNAL_VM_NETWORK_NAME": "Internal",
            "VSPHERE_NODES_EXTERNAL_VM_NETWORK_NAME": "External",
        },
        lambda c: c.nodes,
        NodesConfig(
            internal_subnets=(net("10.0.0.0/8"), net("fd00::/64")),
            external_subnets=(net("192.168.0.0/16"),),
            internal_network_name="Internal",
            external_network_name="External",
        ),
    ),
    (
        "global-secret-variables-move-the-global-secret",
        FILE_GLOBAL_SECRET,
        {"VSPHERE_SECRET_NAME": "env-secret", "VSPHERE_SECRET_NAMESPACE": "env-ns"},
        vcenter("vc1", "secret_ref", "secret_namespace", "secret_name"),
        (GLOBAL_SECRET_REF, "env-ns", "env-secret"),
    ),
    (
        "env-vcenter-without-credentials-uses-the-global-secret",
        FILE_GLOBAL_SECRET,
        {"VSPHERE_VCENTER_A": "vc2"},
        lambda c: (c.vcenters["vc2"].secret_ref, c.vcenters["vc2"].secret_name),
        (GLOBAL_SECRET_REF, "file-secret"),
    ),
    (
        "secrets-directory-variable",
        FILE,
        {"VSPHERE_SECRETS_DIRECTORY": "/run/creds"},
        lambda c: c.secrets_directory,
        "/run/creds",
    ),
]


@pytest.mark.parametrize(
    ("text", "env", "check", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_variables_override_as_upstream(
    text: str, env: dict[str, str], check: Check, expected: object
) -> None:
    assert check(load(env, text)) == expected


@pytest.mark.parametrize(
    ("exists", "expected"),
    [(True, DEFAULT_SECRETS_DIRECTORY), (False, "")],
    ids=["default-directory-present", "default-directory-absent"],
)
def test_the_default_secrets_directory_is_used_when_it_exists(exists: bool, expected: str) -> None:
    assert load({}, exists=exists).secrets_directory == expected


def test_an_unused_default_secrets_directory_is_not_read() -> None:
    """Config credentials only: an /etc/cloud/secrets of something else must not stop kccm."""
    config = load({}, FILE_OWN_CREDS, exists=True)
    assert config.secrets_directory == DEFAULT_SECRETS_DIRECTORY
    CredentialStore(config)  # would raise reading the (absent) directory


BAD: list[tuple[str, str, dict[str, str], str]] = [
    ("insecure-not-a-bool", FILE, {"VSPHERE_INSECURE": "maybe"}, "VSPHERE_INSECURE='maybe'"),
    (
        "roundtrip-negative",
        FILE,
        {"VSPHERE_ROUNDTRIP_COUNT": "-1"},
        "VSPHERE_ROUNDTRIP_COUNT='-1': not an unsigned 32-bit integer",
    ),
    (
        "global-port-not-a-number",
        FILE,
        {"VSPHERE_VCENTER_PORT": "https"},
        "VSPHERE_VCENTER_PORT='https': not a TCP port",
    ),
    (
        "vcenter-port-zero",
        FILE,
        {"VSPHERE_VCENTER_A": "vc2", "VCENTER_A_PORT": "0"},
        "VCENTER_A_PORT='0': not a TCP port",
    ),
    (
        "nodes-cidr",
        FILE,
        {"VSPHERE_NODES_INTERNAL_NETWORK_SUBNET_CIDR": "10.0.0.0/33"},
        "VSPHERE_NODES_INTERNAL_NETWORK_SUBNET_CIDR: '10.0.0.0/33' is not a CIDR",
    ),
    (
        "env-vcenter-without-any-user",
        FILE_OWN_CREDS,
        {"VSPHERE_VCENTER_A": "vc2"},
        "VSPHERE_VCENTER_A=vc2: Username is missing (set VCENTER_A_USERNAME or VSPHERE_USER",
    ),
    (
        "empty-password-variable-wins-over-the-global-one",
        FILE,
        {"VSPHERE_VCENTER_A": "vc2", "VCENTER_A_PASSWORD": ""},
        "VSPHERE_VCENTER_A=vc2: Password is missing (set VCENTER_A_PASSWORD or VSPHERE_PASSWORD",
    ),
]


@pytest.mark.parametrize(("text", "env", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_values_name_the_variable(text: str, env: dict[str, str], message: str) -> None:
    with pytest.raises(CloudConfigError) as err:
        load(env, text)
    assert message in str(err.value)


def test_every_bad_variable_is_reported_at_once() -> None:
    with pytest.raises(CloudConfigError) as err:
        load({"VSPHERE_INSECURE": "maybe", "VSPHERE_VCENTER_PORT": "x"})
    assert len(err.value.issues) == 2


def test_the_file_is_checked_before_the_variables_as_upstream() -> None:
    """Upstream validates the file first: a variable cannot supply a missing password."""
    with pytest.raises(CloudConfigError, match="Password is missing"):
        load({"VSPHERE_PASSWORD": "env-pw"}, '[VirtualCenter "vc1"]\nuser = u\n')


def test_a_password_variable_never_appears_in_errors() -> None:
    with pytest.raises(CloudConfigError) as err:
        load({"VSPHERE_VCENTER_A": "vc2", "VCENTER_A_PASSWORD": "hunter2", "VCENTER_A_PORT": "x"})
    assert "hunter2" not in str(err.value)


def test_ignored_per_vcenter_variables_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    load(
        {
            "VSPHERE_VCENTER_A": "vc2",
            "VCENTER_A_INSECURE": "true",
            "VCENTER_A_ROUNDTRIP": "7",
            "VCENTER_A_IP_FAMILY": "ipv6",
        }
    )
    ignored = sorted(m.split(" ")[1] for m in caplog.messages if "is ignored" in m)
    assert ignored == ["VCENTER_A_INSECURE", "VCENTER_A_IP_FAMILY=ipv6", "VCENTER_A_ROUNDTRIP"]
