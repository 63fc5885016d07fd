"""The one table of cloud controllers: adding a controller is one module plus one row here.

A row names the controller (canonical name and legacy alias, upstream ``k8s.io/cloud-provider/
names``), the client it runs as (user-agent suffix / kube-system service account, upstream
``ControllerInitContext.ClientName``), whether ``--controllers=*`` starts it, and how to build it
from its own options (upstream ``app/controllermanager.go``'s start-function map).
:class:`ControllerOptions` nests each controller's options dataclass, the only home of its
fields and defaults; the flag groups bind flags straight to those objects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kccm.controllers import node, nodelifecycle, pvlabel, route, service
from kccm.controllers.base import ControllerContext

__all__ = [
    "ALIASES",
    "BY_NAME",
    "CONTROLLERS",
    "Builder",
    "ControllerOptions",
    "ControllerSpec",
    "RunnableController",
]


@dataclass
class ControllerOptions:
    """Every controller's own options, one field each."""

    node: node.NodeControllerOptions = field(default_factory=node.NodeControllerOptions)
    node_lifecycle: nodelifecycle.NodeLifecycleControllerOptions = field(
        default_factory=nodelifecycle.NodeLifecycleControllerOptions
    )
    service: service.ServiceControllerOptions = field(
        default_factory=service.ServiceControllerOptions
    )
    route: route.RouteControllerOptions = field(default_factory=route.RouteControllerOptions)
    pv_label: pvlabel.PVLabelControllerOptions = field(
        default_factory=pvlabel.PVLabelControllerOptions
    )


class RunnableController(Protocol):
    async def run(self) -> None: ...
    async def stop(self, grace: float = 30.0) -> bool: ...


Builder = Callable[[ControllerContext, ControllerOptions], RunnableController | None]
"""None (logged by the controller's ``build``) when the provider lacks the capability."""


@dataclass(frozen=True)
class ControllerSpec:
    name: str
    alias: str
    client_name: str
    build: Builder
    enabled_by_default: bool = True


CONTROLLERS: tuple[ControllerSpec, ...] = (
    ControllerSpec(
        node.CONTROLLER_NAME,
        node.SHORT_NAME,
        "node-controller",
        lambda context, options: node.build(context, options.node),
    ),
    ControllerSpec(
        nodelifecycle.CONTROLLER_NAME,
        nodelifecycle.SHORT_NAME,
        "node-controller",
        lambda context, options: nodelifecycle.build(context, options.node_lifecycle),
    ),
    ControllerSpec(
        service.CONTROLLER_NAME,
        service.METRICS_NAME,
        "service-controller",
        lambda context, options: service.build(context, options.service),
    ),
    ControllerSpec(
        route.CONTROLLER_NAME,
        route.CONTROLLER_ALIAS,
        "route-controller",
        lambda context, options: route.build(context, options.route),
    ),
    ControllerSpec(
        pvlabel.CONTROLLER_NAME,
        pvlabel.CONTROLLER_ALIAS,
        "pvl-controller",
        lambda context, options: pvlabel.build(context, options.pv_label),
        enabled_by_default=pvlabel.ENABLED_BY_DEFAULT,
    ),
)
BY_NAME: dict[str, ControllerSpec] = {spec.name: spec for spec in CONTROLLERS}
ALIASES: dict[str, str] = {spec.alias: spec.name for spec in CONTROLLERS}
"""legacy alias -> canonical name"""
