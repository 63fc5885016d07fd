"""Values OCCM v1.36.0 starts with, kccm starts with too (issue 40 item 5): an odd
``tls-insecure``, ``cert-file`` without ``key-file`` (or the other way round), a
``max-shared-lb`` below 1, and OCCM's ``--user-agent`` flag. Each does what it does in OCCM,
with a warning at start where the value does not do what it seems to."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from kccm.app.config import ManagerConfig
from kccm.app.manager import init_provider
from kccm.app.options import KccmOptions
from kccm.app.options.provider import provider_errors
from kccm.cloudprovider.registry import CloudProviderRegistry
from kccm.cloudprovider.useragent import extra_user_agent, set_extra_user_agent, user_agent
from kccm.providers.openstack import new_openstack_cloud
from kccm.providers.openstack.api import USER_AGENT, OpenStackAPI
from kccm.providers.openstack.config import load_openstack_config

GLOBAL = "[Global]\nauth-url = http://k/identity\nusername = u\npassword = p\n"

STARTS = [
    # id, cloud.conf after [Global]'s credentials, the start-up warning ("" none),
    # certificates verified, the client certificate sent, max-shared-lb
    ("tls-insecure-true", "tls-insecure = true\n", "", False, None, 2),
    ("tls-insecure-false", "tls-insecure = false\n", "", True, None, 2),
    (
        "tls-insecure-True-verifies",
        "tls-insecure = True\n",
        "tls-insecure = True: only 'true' turns certificate verification off (OCCM compares "
        "the text with 'true'), so certificates are verified; write 'true'",
        True,
        None,
        2,
    ),
    (
        "tls-insecure-not-a-boolean-verifies",
        "tls-insecure = maybe\n",
        "tls-insecure = maybe: only 'true' turns certificate verification off",
        True,
        None,
        2,
    ),
    (
        "cert-file-without-key-file-sends-none",
        "cert-file = /c.pem\n",
        "cert-file is set without key-file: no client certificate is sent",
        True,
        None,
        2,
    ),
    (
        "key-file-without-cert-file-sends-none",
        "key-file = /k.pem\n",
        "key-file is set without cert-file: no client certificate is sent",
        True,
        None,
        2,
    ),
    ("both-files", "cert-file = /c.pem\nkey-file = /k.pem\n", "", True, ("/c.pem", "/k.pem"), 2),
    (
        "max-shared-lb-zero-shares-nothing",
        "[LoadBalancer]\nmax-shared-lb = 0\n",
        "max-shared-lb = 0: no Service can share a balancer",
        True,
        None,
        0,
    ),
    (
        "max-shared-lb-negative-shares-nothing",
        "[LoadBalancer]\nmax-shared-lb = -1\n",
        "max-shared-lb = -1: no Service can share a balancer",
        True,
        None,
        -1,
    ),
]


@pytest.fixture
def registry() -> CloudProviderRegistry:
    registry = CloudProviderRegistry(entry_point_source=lambda group: [])
    registry.register("openstack", new_openstack_cloud)
    return registry


@pytest.mark.parametrize(
    ("text", "warning", "verify", "cert", "max_shared"),
    [s[1:] for s in STARTS],
    ids=[s[0] for s in STARTS],
)
def test_starts_as_occm_does(
    registry: CloudProviderRegistry,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    text: str,
    warning: str,
    verify: bool,
    cert: tuple[str, str] | None,
    max_shared: int,
) -> None:
    path = tmp_path / "cloud.conf"
    path.write_text(GLOBAL + text)
    assert provider_errors("openstack", str(path), registry) == []
    caplog.set_level(logging.WARNING, logger="kccm.providers.openstack.config")
    config = load_openstack_config(GLOBAL + text)
    said = [r.getMessage() for r in caplog.records if r.name == "kccm.providers.openstack.config"]
    if warning:
        assert any(warning in m for m in said), said
    else:
        assert said == []
    api = OpenStackAPI(config)
    assert api.session.verify is verify
    assert api.session.cert == cert
    assert config.load_balancer.max_shared_lb == max_shared


@pytest.fixture
def no_extra_user_agent() -> Iterator[None]:
    yield
    set_extra_user_agent(())


AGENTS = [
    # id, the command line's --user-agent flags, the values, the openstack User-Agent's head
    ("none", [], [], ""),
    ("one-flag", ["--user-agent=cluster/abc-123"], ["cluster/abc-123"], "cluster/abc-123 "),
    (
        "multiple-flags-last-first",
        ["--user-agent=a/b", "--user-agent", "c/d"],
        ["a/b", "c/d"],
        "c/d a/b ",
    ),
    ("flag-with-space", ["--user-agent=a b"], ["a b"], "a b "),
    ("flag-with-comma-kept-whole", ["--user-agent=a,b"], ["a,b"], "a,b "),
]


@pytest.mark.usefixtures("no_extra_user_agent")
@pytest.mark.parametrize(
    ("args", "values", "head"), [a[1:] for a in AGENTS], ids=[a[0] for a in AGENTS]
)
def test_the_user_agent_flag_is_occms(args: list[str], values: list[str], head: str) -> None:
    options = KccmOptions()
    assert options.flag_set().parse(["--cloud-provider=fake", *args]) == []
    config = options.config()
    assert list(config.user_agent) == values
    set_extra_user_agent(config.user_agent)  # what the daemon does before building the provider
    assert user_agent(USER_AGENT) == head + USER_AGENT
    api = OpenStackAPI(load_openstack_config(GLOBAL))
    assert api.session.user_agent.startswith(f"{head}{USER_AGENT} keystoneauth1/")


def test_the_user_agent_flag_needs_a_value() -> None:
    errors = KccmOptions().flag_set().parse(["--cloud-provider=fake", "--user-agent"])
    assert len(errors) == 1
    assert "user-agent" in errors[0]


@pytest.mark.usefixtures("no_extra_user_agent")
def test_the_daemon_hands_the_values_over_before_building_the_provider() -> None:
    init_provider(ManagerConfig(cloud_provider="fake", user_agent=("a/b", "c/d")))
    assert extra_user_agent() == ("a/b", "c/d")
