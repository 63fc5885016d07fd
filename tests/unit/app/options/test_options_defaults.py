"""Flag groups: upstream defaults and --controllers semantics."""

from __future__ import annotations

import pytest
from options_support import (
    BASE,
    CIDR,
    KCCM_DIFFERENCES,
    KCCM_OWN,
    UPSTREAM_DEFAULTS,
    _config,
)

from kccm.app.config import ManagerConfig
from kccm.app.options import KccmOptions, is_controller_enabled, resolve_controllers
from kccm.controllers.route import RouteControllerOptions
from kccm.controllers.table import ControllerOptions

# -- defaults ------------------------------------------------------------------------------------


def test_defaults_are_upstreams_except_documented_differences() -> None:
    fs = KccmOptions().flag_set()
    assert fs.parse([]) == []
    expected = {**UPSTREAM_DEFAULTS, **KCCM_DIFFERENCES, **KCCM_OWN}
    actual = {name: flag.value for name, flag in fs.flags.items()}
    assert actual == expected


def test_differences_are_documented_in_help() -> None:
    fs = KccmOptions().flag_set()
    assert "upstream 1" in fs.flags["concurrent-service-syncs"].usage
    assert "upstream 1" in fs.flags["concurrent-node-syncs"].usage
    assert "always speaks JSON" in fs.flags["kube-api-content-type"].usage
    assert "upstream 20" in fs.flags["kube-api-qps"].usage
    assert "upstream 30" in fs.flags["kube-api-burst"].usage


def test_default_config_equals_the_contracts_defaults() -> None:
    config = _config(BASE)
    expected = ManagerConfig(
        cloud_provider="fake",
        controller_options=ControllerOptions(route=RouteControllerOptions(cluster_cidr=CIDR)),
        controllers=frozenset(
            {
                "cloud-node-controller",
                "cloud-node-lifecycle-controller",
                "service-lb-controller",
                "node-route-controller",
            }
        ),
    )
    assert config == expected


# -- --controllers -------------------------------------------------------------------------------

ALL_ON = {"cloud-node-controller", "cloud-node-lifecycle-controller", "service-lb-controller"}
ROUTE = "node-route-controller"
PVL = "pv-label-controller"
CONTROLLERS = [
    ("star", ["*"], ALL_ON | {ROUTE}),
    ("star-minus-route", ["*", "-route"], ALL_ON),
    ("minus-route-then-star", ["-route", "*"], ALL_ON),
    ("canonical-minus", ["*", "-node-route-controller"], ALL_ON),
    ("only-foo", ["service"], {"service-lb-controller"}),
    ("only-canonical", ["service-lb-controller", "route"], {"service-lb-controller", ROUTE}),
    ("alias-cloud-node", ["cloud-node"], {"cloud-node-controller"}),
    ("alias-lifecycle", ["cloud-node-lifecycle"], {"cloud-node-lifecycle-controller"}),
    ("pv-label-off-by-default", ["*"], ALL_ON | {ROUTE}),
    ("pv-label-explicit", ["*", "pv-label"], ALL_ON | {ROUTE, PVL}),
    ("first-hit-wins", ["route", "-route"], {ROUTE}),
    ("first-hit-wins-negative", ["-route", "route", "*"], ALL_ON),
    ("empty", [], set()),
    ("only-negations", ["-route"], set()),
]


@pytest.mark.parametrize(
    ("entries", "enabled"), [c[1:] for c in CONTROLLERS], ids=[c[0] for c in CONTROLLERS]
)
def test_controllers_evaluation(entries: list[str], enabled: set[str]) -> None:
    assert resolve_controllers(entries) == frozenset(enabled)


def test_is_controller_enabled_is_upstreams_function() -> None:
    off = frozenset({"b"})
    assert is_controller_enabled("a", off, ["*"])
    assert not is_controller_enabled("b", off, ["*"])
    assert is_controller_enabled("b", off, ["*", "b"])
    assert not is_controller_enabled("a", off, ["-a", "*"])
    assert not is_controller_enabled("a", off, ["c"])


def test_controllers_flag_repeats_append() -> None:
    config = _config([*BASE, "--controllers=service", "--controllers", "route"])
    assert config.controllers == {"service-lb-controller", ROUTE}
