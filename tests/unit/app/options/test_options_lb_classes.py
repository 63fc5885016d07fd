"""--load-balancer-class / --load-balancer-class-only reach the service controller and the
annotations the daemon writes on its own Lease (for ``kccm explain``)."""

from __future__ import annotations

import pytest
from options_support import BASE, _config

from kccm.app.manager import served_classes_annotations
from kccm.controllers.service_predicates import LoadBalancerClasses

CLASSES = "kccm.io/load-balancer-classes"
CLASS_LESS = "kccm.io/load-balancer-class-less"


@pytest.mark.parametrize(
    ("args", "classes", "annotations"),
    [
        pytest.param([], LoadBalancerClasses(), {CLASSES: "", CLASS_LESS: "true"}, id="default"),
        pytest.param(
            ["--load-balancer-class=a.io/lb", "--load-balancer-class", "b.io/lb"],
            LoadBalancerClasses.of(["a.io/lb", "b.io/lb"]),
            {CLASSES: "a.io/lb,b.io/lb", CLASS_LESS: "true"},
            id="repeated",
        ),
        pytest.param(
            ["--load-balancer-class=a.io/lb,b.io/lb"],
            LoadBalancerClasses.of(["a.io/lb", "b.io/lb"]),
            {CLASSES: "a.io/lb,b.io/lb", CLASS_LESS: "true"},
            id="comma-separated",
        ),
        pytest.param(
            ["--load-balancer-class=a.io/lb", "--load-balancer-class-only"],
            LoadBalancerClasses.of(["a.io/lb"], class_only=True),
            {CLASSES: "a.io/lb", CLASS_LESS: "false"},
            id="class-only",
        ),
        pytest.param(
            ["--load-balancer-class=a.io/lb", "--controllers=cloud-node-controller"],
            LoadBalancerClasses.of(["a.io/lb"]),
            {},
            id="no-service-controller-says-nothing",
        ),
    ],
)
def test_classes_reach_the_controller_and_the_lease(
    args: list[str], classes: LoadBalancerClasses, annotations: dict[str, str]
) -> None:
    config = _config([*BASE, *args])
    assert config.controller_options.service.classes() == classes
    assert served_classes_annotations(config) == annotations
