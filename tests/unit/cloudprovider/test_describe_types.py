"""The views of the optional describe calls (issue 27): frozen, hashable, JSON-able."""

from __future__ import annotations

import json

import pytest

from kccm.cloudprovider import (
    BalancerView,
    InstanceView,
    ListenerView,
    TargetHealth,
    TargetView,
)

TARGET = TargetView("n1", "i-1", "10.0.0.1", 30080, "unhealthy", "Target.Timeout")
VIEW = BalancerView(
    "a1b2", "active", [ListenerView(80, "TCP", [TARGET])], {"dns_name": "x.example"}
)


@pytest.mark.parametrize(
    ("value", "want"),
    [
        pytest.param(
            VIEW,
            {
                "name": "a1b2",
                "state": "active",
                "listeners": [
                    {
                        "port": 80,
                        "protocol": "TCP",
                        "targets": [
                            {
                                "node": "n1",
                                "instance": "i-1",
                                "address": "10.0.0.1",
                                "port": 30080,
                                "health": "unhealthy",
                                "detail": "Target.Timeout",
                            }
                        ],
                        "detail": "",
                    }
                ],
                "detail": {"dns_name": "x.example"},
            },
            id="balancer",
        ),
        pytest.param(
            InstanceView("aws:///z/i-1", True, "stopped", {"zone": "z"}),
            {
                "provider_id": "aws:///z/i-1",
                "exists": True,
                "state": "stopped",
                "detail": {"zone": "z"},
            },
            id="instance",
        ),
        pytest.param(
            InstanceView(exists=False),
            {"provider_id": "", "exists": False, "state": "", "detail": {}},
            id="instance-gone",
        ),
    ],
)
def test_to_dict_is_json(value: BalancerView | InstanceView, want: dict[str, object]) -> None:
    assert json.loads(json.dumps(value.to_dict())) == want


def test_views_are_frozen_hashable_and_compare_by_value() -> None:
    copy = BalancerView(
        "a1b2", "active", (ListenerView(80, "TCP", (TARGET,)),), {"dns_name": "x.example"}
    )
    assert copy == VIEW
    assert hash(copy) == hash(VIEW)
    assert TARGET.health is TargetHealth.UNHEALTHY, "a health word becomes the enum"
    with pytest.raises(AttributeError):
        VIEW.state = "gone"  # type: ignore[misc]
    with pytest.raises(TypeError):
        VIEW.detail["x"] = "y"  # type: ignore[index]


def test_an_unknown_health_word_is_refused() -> None:
    with pytest.raises(ValueError, match="sick"):
        TargetView(health="sick")  # type: ignore[arg-type]
