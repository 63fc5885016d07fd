"""The provider's :class:`~kccm.providers.azure.arm.ARMClient` as the balancer's
:class:`~.armapi.ArmApi`, and the balancer's settings from the resolved ``azure.json``.

Each path's ``api-version`` is the one upstream v1.36.5 sends for that kind of resource
(:mod:`kccm.providers.azure.versions`); each call is named after it in the client's ledger
(``loadbalancer:get``, ``publicip:put``, ...).
"""

from __future__ import annotations

import re
from typing import Any

from kccm.providers.azure.arm import ARMClient
from kccm.providers.azure.arm_errors import ARMPreconditionFailed
from kccm.providers.azure.config_fields import AzureConfig
from kccm.providers.azure.loadbalancer.armapi import PreconditionFailed
from kccm.providers.azure.loadbalancer.lbrules import Json
from kccm.providers.azure.loadbalancer.names import LBSettings
from kccm.providers.azure.loadbalancer.unsupported import unsupported_keys
from kccm.providers.azure.versions import ApiVersions

__all__ = ["ClientArm", "lb_settings"]

_KINDS = (
    (re.compile(r"/virtualMachineScaleSets/[^/]+/virtualMachines(/|$)", re.I), "vmssvm"),
    (re.compile(r"/virtualMachineScaleSets(/|$)", re.I), "vmss"),
    (re.compile(r"/virtualMachines(/|$)", re.I), "vm"),
    (re.compile(r"/loadBalancers(/|$)", re.I), "loadbalancer"),
    (re.compile(r"/publicIPAddresses(/|$)", re.I), "publicip"),
    (re.compile(r"/networkSecurityGroups(/|$)", re.I), "securitygroup"),
    (re.compile(r"/networkInterfaces(/|$)", re.I), "interface"),
    (re.compile(r"/subnets(/|$)", re.I), "subnet"),
)


def _kind(path: str) -> str:
    for pattern, kind in _KINDS:
        if pattern.search(path):
            return kind
    raise ValueError(f"no api-version known for {path}")


class ClientArm:
    """:class:`~.armapi.ArmApi` over the provider's ARM client."""

    def __init__(self, client: ARMClient, versions: ApiVersions) -> None:
        self.client = client
        self._versions = {
            "vmssvm": versions.virtual_machine_scale_set_vms,
            "vmss": versions.virtual_machine_scale_sets,
            "vm": versions.virtual_machines,
            "loadbalancer": versions.load_balancers,
            "publicip": versions.public_ip_addresses,
            "securitygroup": versions.security_groups,
            "interface": versions.network_interfaces,
            "subnet": versions.subnets,
        }

    def _version(self, path: str) -> tuple[str, str]:
        kind = _kind(path)
        return kind, self._versions[kind]

    def get(self, path: str) -> Json | None:
        kind, version = self._version(path)
        return self.client.find(path, version, operation=f"{kind}:get")

    def list(self, path: str) -> list[Json]:
        kind, version = self._version(path)
        return self.client.list(path, version, operation=f"{kind}:list")

    def put(
        self, path: str, body: Json, *, if_match: str | None, if_none_match: bool = False
    ) -> Json:
        kind, version = self._version(path)
        try:
            if if_none_match:
                url = f"{self.client.url(path)}?api-version={version}"
                sent = self.client.send(
                    "PUT",
                    path,
                    version,
                    operation=f"{kind}:put",
                    body=body,
                    headers={"If-None-Match": "*"},
                )
                return self.client.poll_lro(sent, url, operation=f"{kind}:put", method="PUT")
            clean: dict[str, Any] = {k: v for k, v in body.items() if k != "etag"}
            return self.client.put(path, clean, version, operation=f"{kind}:put", if_match=if_match)
        except ARMPreconditionFailed as err:
            raise PreconditionFailed(str(err)) from err

    def delete(self, path: str) -> None:
        kind, version = self._version(path)
        self.client.delete(path, version, operation=f"{kind}:delete")


def lb_settings(config: AzureConfig) -> LBSettings:
    """The keys the balancer reads, from ``azure.json`` after upstream's defaults."""
    exclude = config.exclude_master_from_standard_lb
    return LBSettings(
        subscription_id=config.subscription_id,
        resource_group=config.resource_group,
        location=config.location,
        vm_type=config.vm_type or "vmss",
        load_balancer_sku=config.load_balancer_sku or "standard",
        load_balancer_name=config.load_balancer_name,
        load_balancer_resource_group=config.load_balancer_resource_group,
        vnet_name=config.vnet_name,
        vnet_resource_group=config.vnet_resource_group,
        subnet_name=config.subnet_name,
        security_group_name=config.security_group_name,
        security_group_resource_group=config.security_group_resource_group,
        exclude_master_from_standard_lb=True if exclude is None else exclude,
        disable_outbound_snat=bool(config.disable_outbound_snat),
        tags=config.tags,
        tags_map=dict(config.tags_map or {}),
        system_tags=config.system_tags,
        network_subscription_id=config.network_resource_subscription_id,
        primary_vm_set=(
            config.primary_availability_set_name
            if (config.vm_type or "vmss").lower() == "standard"
            else config.primary_scale_set_name
        ),
        shared_probe=config.cluster_service_load_balancer_health_probe_mode.lower() == "shared",
        shared_probe_port=config.cluster_service_shared_load_balancer_health_probe_port or 10256,
        shared_probe_path=config.cluster_service_shared_load_balancer_health_probe_path
        or "/healthz",
        unsupported=unsupported_keys(config),
    )
