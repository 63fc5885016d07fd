"""``[Global] use-clouds``: clouds.yaml read as OCCM's client.ReadClouds reads it (the
cloud.conf's own values win; cloud by name, $OS_CLOUD or the only one; secure.yaml merged)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kccm.cloudprovider import CloudConfigError
from kccm.providers.openstack.config import load_openstack_config

CLOUDS = {
    "clouds": {
        "dev": {
            "auth": {
                "auth_url": "http://dev/identity/v3",
                "username": "dev-user",
                "password": "dev-pw",
                "project_name": "dev-proj",
                "project_domain_name": "Default",
                "user_domain_name": "Default",
            },
            "region_name": "RegionDev",
            "interface": "internal",
            "cacert": "/dev/ca.pem",
        },
        "prod": {
            "auth": {
                "auth_url": "http://prod/identity/v3",
                "application_credential_id": "ac-prod",
                "application_credential_secret": "ac-secret",
            },
            "region_name": "RegionProd",
        },
    }
}


def write(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def clouds_file(tmp_path: Path) -> Path:
    return write(tmp_path / "clouds.yaml", CLOUDS)


CASES = [
    ("named-dev", "cloud = dev\n", {}, "global_.username", "dev-user"),
    ("named-dev-region", "cloud = dev\n", {}, "global_.region", "RegionDev"),
    ("named-dev-project", "cloud = dev\n", {}, "global_.tenant_name", "dev-proj"),
    ("named-dev-interface", "cloud = dev\n", {}, "global_.os_endpoint_type", "internal"),
    ("named-dev-cacert", "cloud = dev\n", {}, "global_.ca_file", "/dev/ca.pem"),
    ("named-prod-ac", "cloud = prod\n", {}, "global_.application_credential_id", "ac-prod"),
    ("os-cloud-env", "", {"OS_CLOUD": "prod"}, "global_.region", "RegionProd"),
    ("conf-wins", "cloud = dev\nregion = Mine\n", {}, "global_.region", "Mine"),
    (
        "conf-auth-url-wins",
        "cloud = dev\nauth-url = http://mine\n",
        {},
        "global_.auth_url",
        "http://mine",
    ),
]


@pytest.mark.parametrize(
    ("extra", "environ", "path", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_values_come_from_the_chosen_cloud(
    clouds_file: Path, extra: str, environ: dict[str, str], path: str, expected: str
) -> None:
    text = f"[Global]\nuse-clouds = true\nclouds-file = {clouds_file}\n{extra}"
    config = load_openstack_config(text, environ=environ)
    owner, field = path.split(".")
    assert getattr(getattr(config, owner), field) == expected


def test_the_only_cloud_is_used_without_a_name(tmp_path: Path) -> None:
    only = write(tmp_path / "one.yaml", {"clouds": {"x": CLOUDS["clouds"]["prod"]}})
    config = load_openstack_config(f"[Global]\nuse-clouds = true\nclouds-file = {only}\n")
    assert config.global_.auth_url == "http://prod/identity/v3"


def test_os_client_config_file_is_read_without_clouds_file(clouds_file: Path) -> None:
    config = load_openstack_config(
        "[Global]\nuse-clouds = true\ncloud = dev\n",
        environ={"OS_CLIENT_CONFIG_FILE": str(clouds_file)},
    )
    assert config.global_.username == "dev-user"


def test_secure_yaml_in_the_working_directory_is_merged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    public = {"clouds": {"dev": {"auth": {"auth_url": "http://dev/v3", "username": "u"}}}}
    write(tmp_path / "clouds.yaml", public)
    write(tmp_path / "secure.yaml", {"clouds": {"dev": {"auth": {"password": "from-secure"}}}})
    monkeypatch.chdir(tmp_path)
    config = load_openstack_config("[Global]\nuse-clouds = true\ncloud = dev\n", environ={})
    assert (config.global_.username, config.global_.password) == ("u", "from-secure")


ERRORS = [
    ("unknown-cloud", "cloud = nope\n", "cloud nope does not exist"),
    ("several-clouds-no-name", "", "could not find cloud"),
]


@pytest.mark.parametrize(("extra", "expected"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_clouds_errors_are_one_line(clouds_file: Path, extra: str, expected: str) -> None:
    text = f"[Global]\nuse-clouds = true\nclouds-file = {clouds_file}\n{extra}"
    with pytest.raises(CloudConfigError, match=expected):
        load_openstack_config(text, environ={})


def test_a_missing_clouds_yaml_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(CloudConfigError, match=r"no clouds\.yaml found"):
        load_openstack_config(
            f"[Global]\nuse-clouds = true\nclouds-file = {tmp_path / 'absent.yaml'}\n",
            environ={},
        )


def test_a_profile_pulls_in_clouds_public_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        tmp_path / "clouds.yaml", {"clouds": {"c": {"profile": "acme", "auth": {"username": "u"}}}}
    )
    public = {
        "public-clouds": {"acme": {"auth": {"auth_url": "http://acme/v3"}, "region_name": "R"}}
    }
    write(tmp_path / "clouds-public.yaml", public)
    monkeypatch.chdir(tmp_path)
    config = load_openstack_config("[Global]\nuse-clouds = true\ncloud = c\n", environ={})
    assert (config.global_.auth_url, config.global_.username, config.global_.region) == (
        "http://acme/v3",
        "u",
        "R",
    )


def test_an_unknown_profile_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "clouds.yaml", {"clouds": {"c": {"profile": "nope", "auth": {}}}})
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CloudConfigError, match="cloud nope does not exist in clouds-public"):
        load_openstack_config("[Global]\nuse-clouds = true\ncloud = c\n", environ={})


def test_a_cloud_without_auth_url_is_an_error(tmp_path: Path) -> None:
    clouds = write(tmp_path / "c.yaml", {"clouds": {"c": {"auth": {"username": "u"}}}})
    with pytest.raises(CloudConfigError, match="auth-url: is required \\(neither"):
        load_openstack_config(f"[Global]\nuse-clouds = true\nclouds-file = {clouds}\n", environ={})
