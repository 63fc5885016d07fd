"""The openstack cloud config: OCCM's cloud.conf read unchanged (every key, OCCM's defaults,
gcfg's value rules, unknown keys ignored as gcfg.FatalOnly does, one line per bad value)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from kccm.app.options.provider import provider_errors
from kccm.cloudprovider import CloudConfigError
from kccm.cloudprovider.registry import CloudProviderRegistry
from kccm.providers.openstack import new_openstack_cloud
from kccm.providers.openstack.config import (
    CheckedOpenStackConfig,
    OpenStackConfig,
    load_openstack_config,
)
from kccm.providers.openstack.config_values import gcfg_bool, gcfg_int, gcfg_uint, go_duration

BASE = """
[Global]
auth-url = http://keystone.example/identity
username = demo
password = secret
tenant-name = demo
region = RegionOne
"""


def load(extra: str = "", **kwargs: Any) -> OpenStackConfig:
    return load_openstack_config(BASE + extra, **kwargs)


def attr(config: OpenStackConfig, path: str) -> Any:
    value: Any = config
    for part in path.split("."):
        value = value[part] if isinstance(value, dict) else getattr(value, part)
    return value


# -- defaults (ReadConfig) ---------------------------------------------------------------------

DEFAULTS = [
    ("load_balancer.enabled", True),
    ("load_balancer.internal_lb", False),
    ("load_balancer.node_selector", ""),
    ("load_balancer.lb_provider", "amphora"),
    ("load_balancer.lb_method", "ROUND_ROBIN"),
    ("load_balancer.create_monitor", False),
    ("load_balancer.manage_security_groups", False),
    ("load_balancer.monitor_delay", 5.0),
    ("load_balancer.monitor_timeout", 3.0),
    ("load_balancer.monitor_max_retries", 1),
    ("load_balancer.monitor_max_retries_down", 3),
    ("load_balancer.cascade_delete", True),
    ("load_balancer.enable_ingress_hostname", False),
    ("load_balancer.ingress_hostname_suffix", "nip.io"),
    ("load_balancer.default_tls_container_ref", ""),
    ("load_balancer.container_store", "barbican"),
    ("load_balancer.max_shared_lb", 2),
    ("load_balancer.provider_requires_serial_api_calls", False),
    ("load_balancer.floating_network_id", ""),
    ("load_balancer_classes", {}),
    ("networking.ipv6_support_disabled", False),
    ("networking.public_network_name", []),
    ("networking.internal_network_name", []),
    ("networking.address_sort_order", ""),
    ("route.router_id", ""),
    ("metadata.search_order", ""),
    ("metadata.timeout", 60.0),
    ("global_.insecure", False),
    ("global_.endpoint_interface", "public"),
    ("global_.use_clouds", False),
]


@pytest.mark.parametrize(("path", "expected"), DEFAULTS, ids=[d[0] for d in DEFAULTS])
def test_defaults_are_occms(path: str, expected: Any) -> None:
    assert attr(load(), path) == expected


# -- every key ----------------------------------------------------------------------------------

KEYS = [
    # [Global]: client.AuthOpts
    ("Global", "auth-url", "http://k/v3", "global_.auth_url", "http://k/v3"),
    ("Global", "user-id", "u1", "global_.user_id", "u1"),
    ("Global", "username", "alice", "global_.username", "alice"),
    ("Global", "password", "pw", "global_.password", "pw"),
    ("Global", "tenant-id", "p1", "global_.tenant_id", "p1"),
    ("Global", "tenant-name", "proj", "global_.tenant_name", "proj"),
    ("Global", "trust-id", "t1", "global_.trust_id", "t1"),
    ("Global", "trustee-id", "te1", "global_.trustee_id", "te1"),
    ("Global", "trustee-password", "tp", "global_.trustee_password", "tp"),
    ("Global", "domain-id", "d1", "global_.domain_id", "d1"),
    ("Global", "domain-name", "Dom", "global_.domain_name", "Dom"),
    ("Global", "tenant-domain-id", "td", "global_.tenant_domain_id", "td"),
    ("Global", "tenant-domain-name", "TD", "global_.tenant_domain_name", "TD"),
    ("Global", "user-domain-id", "ud", "global_.user_domain_id", "ud"),
    ("Global", "user-domain-name", "UD", "global_.user_domain_name", "UD"),
    ("Global", "region", "RegionTwo", "global_.region", "RegionTwo"),
    ("Global", "os-endpoint-type", "internal", "global_.endpoint_interface", "internal"),
    ("Global", "os-endpoint-type", "internalURL", "global_.endpoint_interface", "internal"),
    ("Global", "ca-file", "/etc/ca.pem", "global_.ca_file", "/etc/ca.pem"),
    ("Global", "tls-insecure", "true", "global_.insecure", True),
    ("Global", "tls-insecure", "false", "global_.insecure", False),
    ("Global", "tls-insecure", "True", "global_.insecure", False),  # OCCM: only "true"
    ("Global", "tls-insecure", "yes", "global_.insecure", False),
    ("Global", "token", "tok", "global_.token", "tok"),
    ("Global", "CAFileContents", "PEM", "global_.ca_file_contents", "PEM"),
    ("Global", "application-credential-id", "ac", "global_.application_credential_id", "ac"),
    ("Global", "application-credential-name", "n", "global_.application_credential_name", "n"),
    ("Global", "application-credential-secret", "s", "global_.application_credential_secret", "s"),
    ("Global", "clouds-file", "/x.yaml", "global_.clouds_file", "/x.yaml"),
    ("Global", "cloud", "c", "global_.cloud", "c"),
    ("Global", "AUTH-URL", "http://upper", "global_.auth_url", "http://upper"),
    # [LoadBalancer]: LoadBalancerOpts
    ("LoadBalancer", "enabled", "false", "load_balancer.enabled", False),
    ("LoadBalancer", "lb-version", "v2", "load_balancer.lb_version", "v2"),
    ("LoadBalancer", "subnet-id", "s1", "load_balancer.subnet_id", "s1"),
    ("LoadBalancer", "member-subnet-id", "m1", "load_balancer.member_subnet_id", "m1"),
    ("LoadBalancer", "network-id", "n1", "load_balancer.network_id", "n1"),
    ("LoadBalancer", "floating-network-id", "f1", "load_balancer.floating_network_id", "f1"),
    ("LoadBalancer", "floating-subnet-id", "fs", "load_balancer.floating_subnet_id", "fs"),
    ("LoadBalancer", "floating-subnet", "~pub.*", "load_balancer.floating_subnet", "~pub.*"),
    ("LoadBalancer", "floating-subnet-tags", "a,b", "load_balancer.floating_subnet_tags", "a,b"),
    ("LoadBalancer", "lb-method", "SOURCE_IP_PORT", "load_balancer.lb_method", "SOURCE_IP_PORT"),
    ("LoadBalancer", "lb-provider", "ovn", "load_balancer.lb_provider", "ovn"),
    ("LoadBalancer", "create-monitor", "yes", "load_balancer.create_monitor", True),
    ("LoadBalancer", "monitor-delay", "1m30s", "load_balancer.monitor_delay", 90.0),
    ("LoadBalancer", "monitor-timeout", "500ms", "load_balancer.monitor_timeout", 0.5),
    ("LoadBalancer", "monitor-max-retries", "0x4", "load_balancer.monitor_max_retries", 4),
    ("LoadBalancer", "monitor-max-retries-down", "7", "load_balancer.monitor_max_retries_down", 7),
    ("LoadBalancer", "manage-security-groups", "on", "load_balancer.manage_security_groups", True),
    ("LoadBalancer", "internal-lb", "1", "load_balancer.internal_lb", True),
    ("LoadBalancer", "node-selector", "a=b", "load_balancer.node_selector", "a=b"),
    ("LoadBalancer", "cascade-delete", "off", "load_balancer.cascade_delete", False),
    ("LoadBalancer", "flavor-id", "fl", "load_balancer.flavor_id", "fl"),
    ("LoadBalancer", "availability-zone", "az1", "load_balancer.availability_zone", "az1"),
    (
        "LoadBalancer",
        "enable-ingress-hostname",
        "true",
        "load_balancer.enable_ingress_hostname",
        True,
    ),
    (
        "LoadBalancer",
        "ingress-hostname-suffix",
        "x.io",
        "load_balancer.ingress_hostname_suffix",
        "x.io",
    ),
    ("LoadBalancer", "max-shared-lb", "5", "load_balancer.max_shared_lb", 5),
    ("LoadBalancer", "container-store", "external", "load_balancer.container_store", "external"),
    (
        "LoadBalancer",
        "provider-requires-serial-api-calls",
        "true",
        "load_balancer.provider_requires_serial_api_calls",
        True,
    ),
    (
        "LoadBalancer",
        "default-tls-container-ref",
        "https://barbican/c",
        "load_balancer.default_tls_container_ref",
        "https://barbican/c",
    ),
    # [Networking]
    ("Networking", "ipv6-support-disabled", "true", "networking.ipv6_support_disabled", True),
    ("Networking", "public-network-name", "ext", "networking.public_network_name", ["ext"]),
    ("Networking", "internal-network-name", "priv", "networking.internal_network_name", ["priv"]),
    (
        "Networking",
        "address-sort-order",
        "10.0.0.0/8",
        "networking.address_sort_order",
        "10.0.0.0/8",
    ),
    # [Route], [Metadata]
    ("Route", "router-id", "r1", "route.router_id", "r1"),
    ("Metadata", "search-order", "metadataService", "metadata.search_order", "metadataService"),
    ("Metadata", "request-timeout", "10s", "metadata.timeout", 10.0),
]


@pytest.mark.parametrize(
    ("section", "key", "value", "path", "expected"),
    KEYS,
    ids=[f"{k[0]}.{k[1]}={k[2]}" for k in KEYS],
)
def test_every_key_is_read(section: str, key: str, value: str, path: str, expected: Any) -> None:
    config = load(f"\n[{section}]\n{key} = {value}\n")
    assert attr(config, path) == expected


LB_CLASS_KEYS = [
    "floating-network-id",
    "floating-subnet-id",
    "floating-subnet",
    "floating-subnet-tags",
    "network-id",
    "subnet-id",
    "member-subnet-id",
]


@pytest.mark.parametrize("key", LB_CLASS_KEYS)
def test_load_balancer_class_keys(key: str) -> None:
    config = load(f'\n[LoadBalancerClass "internal"]\n{key} = v-{key}\n')
    lb_class = config.load_balancer_classes["internal"]
    assert getattr(lb_class, key.replace("-", "_")) == f"v-{key}"


def test_several_load_balancer_classes() -> None:
    config = load(
        '\n[LoadBalancerClass "a"]\nsubnet-id = s1\n[LoadBalancerClass "b"]\nnetwork-id = n2\n'
    )
    assert sorted(config.load_balancer_classes) == ["a", "b"]
    assert config.load_balancer_classes["b"].network_id == "n2"


def test_multi_valued_network_names_or_and_an_empty_value_clears() -> None:
    config = load(
        "\n[Networking]\npublic-network-name = a\npublic-network-name = b\n"
        "internal-network-name = x\ninternal-network-name =\ninternal-network-name = y\n"
    )
    assert config.networking.public_network_name == ["a", "b"]
    assert config.networking.internal_network_name == ["y"]


def test_a_bare_bool_is_true() -> None:
    assert load("\n[LoadBalancer]\ncreate-monitor\n").load_balancer.create_monitor is True


def test_project_spellings_stand_for_empty_tenant_keys(caplog: pytest.LogCaptureFixture) -> None:
    text = (
        "[Global]\nauth-url = http://k\nproject-id = p1\nproject-domain-name = D\n"
        "tenant-domain-name = T\n"
    )
    config = load_openstack_config(text)
    assert config.global_.tenant_id == "p1"
    assert config.global_.tenant_domain_name == "T"  # the OCCM key wins
    assert "project-id is not an OCCM key" in caplog.text


def test_secrets_are_not_in_the_repr() -> None:
    text = BASE + "token = t0k\ntrustee-password = tpw\napplication-credential-secret = acs\n"
    shown = repr(load_openstack_config(text))
    for secret in ("secret", "t0k", "tpw", "acs"):
        assert secret not in shown


# -- unknown keys: ignored, as gcfg.FatalOnly ---------------------------------------------------


def test_unknown_sections_and_keys_are_ignored_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    config = load(
        "bogus-key = 1\n[BlockStorage]\nbs-version = v3\n[LoadBalancer]\nno-such = x\n"
        "floating-network-id = f\n"
    )
    assert config.load_balancer.floating_network_id == "f"
    messages = [r.getMessage() for r in caplog.records]
    assert any("unknown key 'bogus-key' in [Global]" in m for m in messages)
    assert any("unknown section [BlockStorage]" in m for m in messages)
    assert any("unknown key 'no-such' in [LoadBalancer]" in m for m in messages)


# -- errors: one line naming the key ---------------------------------------------------------

ERRORS = [
    (
        "bad-bool",
        "\n[LoadBalancer]\ncreate-monitor = maybe\n",
        'key "create-monitor": invalid bool',
    ),
    ("empty-bool", "\n[LoadBalancer]\nenabled =\n", 'key "enabled": invalid bool'),
    ("bad-int", "\n[LoadBalancer]\nmax-shared-lb = two\n", 'key "max-shared-lb": invalid int'),
    (
        "negative-uint",
        "\n[LoadBalancer]\nmonitor-max-retries = -1\n",
        'key "monitor-max-retries": invalid unsigned int',
    ),
    (
        "duration-without-unit",
        "\n[LoadBalancer]\nmonitor-delay = 5\n",
        'key "monitor-delay": invalid duration',
    ),
    (
        "bad-request-timeout",
        "\n[Metadata]\nrequest-timeout = soon\n",
        'key "request-timeout": invalid duration',
    ),
    ("bare-string", "\n[Route]\nrouter-id\n", 'key "router-id": needs a value'),
    ("lb-version", "\n[LoadBalancer]\nlb-version = v1\n", "lb-version: 'v1' is not supported"),
    (
        "search-order-element",
        "\n[Metadata]\nsearch-order = configDrive,cloudInit\n",
        "search-order: invalid element 'cloudInit'",
    ),
    (
        "search-order-length",
        "\n[Metadata]\nsearch-order = configDrive,metadataService,configDrive\n",
        "search-order: cannot contain more than 2 elements",
    ),
    ("syntax", "\n[LoadBalancer\n", "syntax error"),
]


@pytest.mark.parametrize(("text", "expected"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_a_bad_value_is_one_line_naming_the_key(text: str, expected: str) -> None:
    with pytest.raises(CloudConfigError) as caught:
        load(text)
    assert len(caught.value.issues) == 1
    assert expected in caught.value.issues[0]
    assert "\n" not in caught.value.issues[0]


def test_a_secret_value_is_never_shown_in_an_error() -> None:
    with pytest.raises(CloudConfigError) as caught:
        load_openstack_config("[Global]\nauth-url = http://k\npassword\n")
    assert "needs a value" in str(caught.value)


def test_auth_url_is_required_without_use_clouds() -> None:
    with pytest.raises(CloudConfigError, match="auth-url: is required"):
        load_openstack_config("[Global]\nusername = u\n")


def test_no_file_is_an_error() -> None:
    with pytest.raises(CloudConfigError, match="no OpenStack cloud provider config file"):
        load_openstack_config(None)


# -- the up-front check (exit 2 before start-up) ------------------------------------------------


@pytest.fixture
def registry() -> CloudProviderRegistry:
    registry = CloudProviderRegistry(entry_point_source=lambda group: [])
    registry.register("openstack", new_openstack_cloud)
    return registry


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("\n[BlockStorage]\nbs-version = v3\n[Global]\nnot-a-key = 1\n", []),
        ("\n[LoadBalancer]\ncreate-monitor = maybe\n", ['key "create-monitor": invalid bool']),
        ("\n[LoadBalancer]\nlb-version = v1\n", ["lb-version: 'v1' is not supported"]),
    ],
    ids=["unknown-keys-pass", "bad-bool", "bad-lb-version"],
)
def test_the_up_front_check(
    registry: CloudProviderRegistry, tmp_path: Path, extra: str, expected: list[str]
) -> None:
    path = tmp_path / "cloud.conf"
    path.write_text(BASE + extra)
    errors = provider_errors("openstack", str(path), registry)
    assert len(errors) == len(expected)
    for error, fragment in zip(errors, expected, strict=True):
        assert fragment in error


def test_the_checked_schema_is_the_config() -> None:
    assert issubclass(CheckedOpenStackConfig, OpenStackConfig)
    assert new_openstack_cloud.config_schema is CheckedOpenStackConfig  # type: ignore[attr-defined]


# -- gcfg's value rules -------------------------------------------------------------------------

DURATIONS = [
    ("5s", 5.0),
    ("1m30s", 90.0),
    ("1.5h", 5400.0),
    ("300ms", 0.3),
    ("2us", 2e-6),
    ("-5s", -5.0),
    ("0", 0.0),
    (".5s", 0.5),
]


@pytest.mark.parametrize(("text", "seconds"), DURATIONS, ids=[d[0] for d in DURATIONS])
def test_go_durations(text: str, seconds: float) -> None:
    assert go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5", "", "s", "1x", "5 s", "1.s.", "--1s"])
def test_bad_go_durations(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        go_duration(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [("10", 10), ("0x1F", 31), ("-3", -3), ("+4", 4)],
    ids=["dec", "hex", "neg", "plus"],
)
def test_gcfg_ints(text: str, value: int) -> None:
    assert gcfg_int(text) == value


@pytest.mark.parametrize("text", ["1.5", "ten", "0o7", ""])
def test_bad_gcfg_ints(text: str) -> None:
    with pytest.raises(ValueError, match="invalid int"):
        gcfg_int(text)


@pytest.mark.parametrize("text", ["-1", "+1"])
def test_gcfg_uints_take_no_sign(text: str) -> None:
    with pytest.raises(ValueError, match="invalid unsigned int"):
        gcfg_uint(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("YES", True),
        ("On", True),
        ("1", True),
        ("false", False),
        ("no", False),
        ("OFF", False),
        ("0", False),
    ],
)
def test_gcfg_bools(text: str, value: bool) -> None:
    assert gcfg_bool(text) is value
