"""OpenStackAPI against the emulator: auth methods, start-up errors (one line, exit 2),
token renewal, fault -> error mapping, the ledger, paging, and no credential in the logs."""

from __future__ import annotations

import dataclasses
import io
import logging
from pathlib import Path
from typing import Any

import pytest
from keystoneauth1.identity import v3
from os_core_world import World

from kccm.app.config import ConfigurationError, ManagerConfig
from kccm.app.manager import EXIT_CONFIG, init_provider
from kccm.cloudprovider import CloudProviderInitError, Throttled
from kccm.cloudprovider.errors import find_error
from kccm.cloudprovider.registry import CloudProviderRegistry
from kccm.providers.openstack import OpenStackCloud, new_openstack_cloud
from kccm.providers.openstack.api import (
    OpenStackAPI,
    OpenStackAPIError,
    OpenStackAuthError,
    OpenStackConflict,
    OpenStackError,
    OpenStackNotFound,
    auth_plugin,
    keystone_v3_url,
    mapped_error,
)
from kccm.providers.openstack.config import load_openstack_config


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://k/identity", "http://k/identity/v3"),
        ("http://k/identity/v3", "http://k/identity/v3"),
        ("http://k:5000/v3/", "http://k:5000/v3"),
        ("http://k:5000/v2.0", "http://k:5000/v3"),
    ],
    ids=["appended", "kept", "trailing-slash", "v2-replaced"],
)
def test_keystone_v3_url(given: str, expected: str) -> None:
    assert keystone_v3_url(given) == expected


# -- authentication -----------------------------------------------------------------------------


def _auth_variants(emulator: Any) -> dict[str, dict[str, dict[str, str | None]]]:
    conf = emulator.config
    no_password = {"username": None, "password": None, "tenant-name": None}
    return {
        "password-by-name": {},
        "auth-url-without-v3": {"Global": {"auth-url": emulator.base_url + "/identity"}},
        "password-by-project-id": {
            "Global": {"tenant-name": None, "tenant-id": conf["project_id"]}
        },
        "application-credential-id": {
            "Global": {
                **no_password,
                "application-credential-id": conf["app_cred_id"],
                "application-credential-secret": conf["app_cred_secret"],
            }
        },
        "domain-name-for-both-domains": {
            "Global": {
                "user-domain-name": None,
                "tenant-domain-name": None,
                "domain-name": conf["domain"],
            }
        },
        "internal-endpoints": {"Global": {"os-endpoint-type": "internal"}},
    }


AUTH_IDS = [
    "password-by-name",
    "auth-url-without-v3",
    "password-by-project-id",
    "application-credential-id",
    "domain-name-for-both-domains",
    "internal-endpoints",
]


@pytest.mark.parametrize("variant", AUTH_IDS)
def test_auth_methods_reach_the_services(emulator: Any, world: World, variant: str) -> None:
    sections = _auth_variants(emulator)[variant]
    cloud = new_openstack_cloud(io.StringIO(emulator.cloud_conf(sections)))
    server = world.server(f"auth-{variant}")
    assert cloud.api.request("compute", "GET", f"/servers/{server['id']}", operation="get")


STARTUP_ERRORS = [
    (
        "wrong-password",
        {"Global": {"password": "not-the-password"}},
        "refused the [Global] credentials",
    ),
    ("unknown-region", {"Global": {"region": "Atlantis"}}, "in region 'Atlantis'"),
    ("no-such-interface", {"Global": {"os-endpoint-type": "nowhere"}}, "interface nowhere"),
]


@pytest.mark.parametrize(
    ("sections", "expected"), [e[1:] for e in STARTUP_ERRORS], ids=[e[0] for e in STARTUP_ERRORS]
)
def test_startup_errors_are_one_line_and_exit_2(
    emulator: Any, sections: dict[str, Any], expected: str
) -> None:
    registry = CloudProviderRegistry(entry_point_source=lambda group: [])
    registry.register("openstack", new_openstack_cloud)
    with pytest.raises(CloudProviderInitError) as caught:  # the manager: exit 2
        registry.get_cloud_provider("openstack", io.StringIO(emulator.cloud_conf(sections)))
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message
    assert "not-the-password" not in message
    assert find_error(caught.value, OpenStackAuthError) is not None


def test_unknown_region_names_the_regions_the_catalog_has(emulator: Any) -> None:
    with pytest.raises(OpenStackAuthError, match="the catalog has it in: RegionOne"):
        new_openstack_cloud(io.StringIO(emulator.cloud_conf({"Global": {"region": "Atlantis"}})))


def test_load_balancer_disabled_needs_no_octavia(emulator: Any) -> None:
    conf = emulator.cloud_conf({"LoadBalancer": {"enabled": "false"}})
    cloud = new_openstack_cloud(io.StringIO(conf))
    assert cloud.load_balancer() is None


def test_an_unreachable_keystone_is_an_error(emulator: Any) -> None:
    conf = emulator.cloud_conf({"Global": {"auth-url": "http://127.0.0.1:9/identity/v3"}})
    with pytest.raises(OpenStackAPIError, match="cannot reach"):
        new_openstack_cloud(io.StringIO(conf))


# -- tokens -------------------------------------------------------------------------------------


def _token_posts(world: World, since: int) -> int:
    return sum(1 for r in world.admin.requests(since) if r["path"].endswith("/auth/tokens"))


def test_an_expired_token_is_renewed(world: World, cloud: OpenStackCloud) -> None:
    server = world.server("token-1")
    since = world.admin.last_seq()
    world.admin.expire_tokens()
    found = cloud.api.request("compute", "GET", f"/servers/{server['id']}", operation="get")
    assert found["server"]["id"] == server["id"]
    assert _token_posts(world, since) == 1
    statuses = [r["status"] for r in world.admin.requests(since) if r["service"] == "compute"]
    assert statuses == [401, 200]


def test_a_short_lived_token_is_renewed_before_use(
    world: World, emulator: Any, make_cloud: Any
) -> None:
    emulator.admin.set_config(token_ttl=1.0)
    try:
        cloud = make_cloud()
        since = world.admin.last_seq()
        cloud.api.session.auth.auth_ref = None  # as if the token reached its expiry
        cloud.api.request("network", "GET", "/v2.0/networks", operation="list_networks")
        assert _token_posts(world, since) == 1
    finally:
        emulator.admin.set_config(token_ttl=3600.0)


# -- errors -------------------------------------------------------------------------------------

FAULTS = [
    ("not-found", 404, OpenStackNotFound),
    ("conflict", 409, OpenStackConflict),
    ("server-error", 500, OpenStackAPIError),
    ("bad-request", 400, OpenStackAPIError),
    ("rate-limited", 429, Throttled),
    ("unavailable", 503, Throttled),
]


@pytest.mark.parametrize(("status", "error"), [f[1:] for f in FAULTS], ids=[f[0] for f in FAULTS])
def test_faults_map_to_errors(
    world: World, cloud: OpenStackCloud, status: int, error: type[Exception]
) -> None:
    world.admin.fault("network", "GET", r"/v2\.0/networks$", status=status)
    with pytest.raises(error) as caught:
        cloud.api.request("network", "GET", "/v2.0/networks", operation="list_networks")
    assert "network list_networks" in str(caught.value)
    if isinstance(caught.value, OpenStackError):
        assert caught.value.status == status


def test_a_status_in_ok_is_an_answer(world: World, cloud: OpenStackCloud) -> None:
    world.admin.fault("network", "GET", r"/v2\.0/networks$", status=404)
    found = cloud.api.request(
        "network", "GET", "/v2.0/networks", operation="list_networks", ok=(200, 404)
    )
    assert found is not None


@pytest.mark.parametrize(
    ("status", "error"),
    [(503, Throttled), (500, OpenStackAPIError)],
    ids=["keystone-unavailable", "keystone-error"],
)
def test_a_failed_token_renewal_maps_like_any_answer(
    world: World, cloud: OpenStackCloud, status: int, error: type[Exception]
) -> None:
    world.admin.expire_tokens()
    world.admin.fault("identity", "POST", r"/auth/tokens$", status=status)
    with pytest.raises(error, match="Keystone"):
        cloud.api.request("network", "GET", "/v2.0/networks", operation="list_networks")
    cloud.api.request("network", "GET", "/v2.0/networks", operation="list_networks")


def test_the_error_message_is_the_services(world: World, cloud: OpenStackCloud) -> None:
    with pytest.raises(OpenStackNotFound, match="could not be found"):
        cloud.api.request("compute", "GET", "/servers/no-such-server", operation="get_server")


def test_latency_beyond_the_request_timeout_is_an_error(world: World, emulator: Any) -> None:
    config = load_openstack_config(emulator.cloud_conf({"Metadata": {"request-timeout": "200ms"}}))
    api = OpenStackAPI(config)
    api.verify(("network",))
    world.admin.fault("network", "GET", r"/v2\.0/networks$", kind="latency", latency=2.0)
    with pytest.raises(OpenStackAPIError) as caught:
        api.request("network", "GET", "/v2.0/networks", operation="list_networks")
    assert caught.value.status == 0


# -- ledger and paging --------------------------------------------------------------------------


def test_the_ledger_counts_reads_and_writes(world: World, cloud: OpenStackCloud) -> None:
    server = world.server("ledger-1")
    before = cloud.api.ledger.snapshot()
    cloud.api.request("compute", "GET", f"/servers/{server['id']}", operation="get_server")
    port = next(
        cloud.api.paged(
            "network", "/v2.0/ports", "ports", {"device_id": server["id"]}, operation="list_ports"
        )
    )
    cloud.api.request(
        "network",
        "PUT",
        f"/v2.0/ports/{port['id']}",
        json={"port": {"name": port["name"]}},
        operation="update_port",
    )
    delta = cloud.api.ledger.snapshot().since(before)
    assert dict(delta.reads) == {"compute:get_server": 1, "network:list_ports": 1}
    assert dict(delta.writes) == {"network:update_port": 1}


def test_paged_follows_the_next_links(world: World, cloud: OpenStackCloud) -> None:
    for i in range(3):
        world.server(f"page-{i}")
    since = world.admin.last_seq()
    names = [
        s["name"]
        for s in cloud.api.paged(
            "compute", "/servers/detail", "servers", {"limit": 1}, operation="list_servers"
        )
        if s["name"].startswith("page-")
    ]
    assert sorted(names) == ["page-0", "page-1", "page-2"]
    listings = [r for r in world.admin.requests(since) if r["path"].endswith("/servers/detail")]
    assert len(listings) >= 3


# -- secrets ------------------------------------------------------------------------------------


def test_credentials_are_never_logged(
    world: World, emulator: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    conf = emulator.config
    cloud = new_openstack_cloud(io.StringIO(emulator.cloud_conf()))
    world.admin.expire_tokens()
    cloud.api.request("network", "GET", "/v2.0/networks", operation="list_networks")
    with pytest.raises(OpenStackAuthError):
        new_openstack_cloud(
            io.StringIO(emulator.cloud_conf({"Global": {"password": "wrong-Pa55word"}}))
        )
    assert conf["password"] not in caplog.text
    assert "wrong-Pa55word" not in caplog.text
    assert conf["password"] not in repr(dataclasses.asdict(cloud.config.load_balancer))
    assert conf["password"] not in repr(cloud.config)


@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        ({"Global": {"password": "not-the-password"}}, "refused the [Global] credentials"),
        ({"Global": {"region": "Atlantis"}}, "no compute endpoint"),
        ({"LoadBalancer": {"lb-version": "v1"}}, "lb-version: 'v1' is not supported"),
    ],
    ids=["wrong-password", "unknown-region", "bad-value"],
)
def test_the_daemon_stops_with_one_configuration_error(
    emulator: Any, tmp_path: Path, sections: dict[str, Any], expected: str
) -> None:
    """The manager's init_provider: a ConfigurationError is exit code 2 (run_manager)."""
    path = tmp_path / "cloud.conf"
    path.write_text(emulator.cloud_conf(sections))
    reference = "kccm.providers.openstack:new_openstack_cloud"
    with pytest.raises(ConfigurationError) as caught:
        init_provider(ManagerConfig(cloud_provider=reference, cloud_config=str(path)))
    assert len(caught.value.problems) == 1
    assert expected in caught.value.problems[0]
    assert "\n" not in caught.value.problems[0]
    assert EXIT_CONFIG == 2


# -- the auth plugin and TLS, as NewOpenStackClient chooses them ---------------------------------

GLOBAL = "[Global]\nauth-url = http://k/identity\n"
PLUGINS = [
    (
        "password-project-name",
        "username = u\npassword = p\ntenant-name = t\ntenant-domain-name = D\n"
        "user-domain-name = U\n",
        v3.Password,
        {"username": "u", "project_name": "t", "project_domain_name": "D", "user_domain_name": "U"},
    ),
    (
        "password-project-id-wins",
        "username = u\npassword = p\ntenant-id = tid\ntenant-name = t\n",
        v3.Password,
        {"project_id": "tid", "project_name": None},
    ),
    (
        "domain-fills-user-and-project-domains",
        "username = u\npassword = p\ntenant-name = t\ndomain-id = d1\n",
        v3.Password,
        {"user_domain_id": "d1", "project_domain_id": "d1"},
    ),
    (
        "domain-scope-without-project",
        "username = u\npassword = p\ndomain-name = Dom\n",
        v3.Password,
        {"domain_name": "Dom", "project_name": None},
    ),
    (
        "trust-as-trustee",
        "user-id = u1\npassword = p\ntrust-id = tr\ntrustee-id = te\ntrustee-password = tp\n",
        v3.Password,
        {"user_id": "te", "trust_id": "tr", "project_id": None},
    ),
    (
        "application-credential-id",
        "application-credential-id = ac\napplication-credential-secret = s\nusername = u\n",
        v3.ApplicationCredential,
        {"application_credential_id": "ac"},
    ),
    (
        "application-credential-name-with-user",
        "application-credential-name = acn\napplication-credential-secret = s\nusername = u\n"
        "user-domain-name = D\n",
        v3.ApplicationCredential,
        {"application_credential_name": "acn", "username": "u", "user_domain_name": "D"},
    ),
    ("token", "token = tok\ntenant-id = t1\n", v3.Token, {"project_id": "t1"}),
]


def _method_attrs(plugin: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for method in plugin.auth_methods:
        found.update(vars(method))
    found.update(
        {
            k: getattr(plugin, k)
            for k in ("project_id", "project_name", "domain_name", "trust_id")
            if hasattr(plugin, k)
        }
    )
    found.update(
        {
            k: getattr(plugin, k)
            for k in ("project_domain_id", "project_domain_name")
            if hasattr(plugin, k)
        }
    )
    return found


@pytest.mark.parametrize(
    ("text", "kind", "expected"), [p[1:] for p in PLUGINS], ids=[p[0] for p in PLUGINS]
)
def test_the_auth_plugin(text: str, kind: type, expected: dict[str, Any]) -> None:
    plugin = auth_plugin(load_openstack_config(GLOBAL + text).global_)
    assert type(plugin) is kind
    assert plugin.auth_url == "http://k/identity/v3"
    attrs = _method_attrs(plugin)
    for key, value in expected.items():
        assert attrs.get(key) == value, key


TLS = [
    ("default", "", True, None),
    ("ca-file", "ca-file = /etc/ca.pem\n", "/etc/ca.pem", None),
    ("insecure-wins", "ca-file = /etc/ca.pem\ntls-insecure = true\n", False, None),
    ("client-cert", "cert-file = /c.pem\nkey-file = /k.pem\n", True, ("/c.pem", "/k.pem")),
]


@pytest.mark.parametrize(("text", "verify", "cert"), [t[1:] for t in TLS], ids=[t[0] for t in TLS])
def test_tls_settings(text: str, verify: Any, cert: Any) -> None:
    api = OpenStackAPI(load_openstack_config(GLOBAL + "username = u\npassword = p\n" + text))
    assert api.session.verify == verify
    assert api.session.cert == cert


def test_ca_file_contents_are_written_to_a_file() -> None:
    config = load_openstack_config(GLOBAL + "username = u\npassword = p\nCAFileContents = PEM\n")
    verify = OpenStackAPI(config).session.verify
    assert isinstance(verify, str)
    try:
        assert Path(verify).read_text() == "PEM"
    finally:
        Path(verify).unlink()


def test_the_request_timeout_is_the_sessions() -> None:
    text = GLOBAL + "username = u\npassword = p\n[Metadata]\nrequest-timeout = 7s\n"
    assert OpenStackAPI(load_openstack_config(text)).session.timeout == 7.0


def test_without_a_region_the_only_region_is_used(emulator: Any) -> None:
    cloud = new_openstack_cloud(io.StringIO(emulator.cloud_conf({"Global": {"region": None}})))
    assert cloud.api.endpoint("compute").endswith("/compute/v2.1")


def test_without_a_region_several_regions_are_an_error(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load_openstack_config(emulator.cloud_conf({"Global": {"region": None}}))
    api = OpenStackAPI(config)
    monkeypatch.setattr(api, "_catalog_regions", lambda service: ["RegionOne", "RegionTwo"])
    with pytest.raises(OpenStackAuthError, match=r"several regions \(RegionOne, RegionTwo\)"):
        api.verify(("compute",))


@pytest.mark.parametrize(
    ("status", "retry_after", "expected"),
    [
        (429, "7", Throttled),
        (503, None, Throttled),
        (413, "3", Throttled),
        (413, None, OpenStackAPIError),
        (404, None, OpenStackNotFound),
        (409, None, OpenStackConflict),
        (502, None, OpenStackAPIError),
    ],
    ids=["429", "503", "413-over-limit", "413-quota", "404", "409", "502"],
)
def test_mapped_error(status: int, retry_after: str | None, expected: type[Exception]) -> None:
    seconds = float(retry_after) if retry_after else None
    error = mapped_error(status, "text", seconds)
    assert type(error) is expected
    if isinstance(error, Throttled):
        assert error.retry_after == seconds
