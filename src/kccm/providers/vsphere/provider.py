"""The ``vsphere`` cloud provider (upstream ``pkg/cloudprovider/vsphere/cloud.go``).

Supports InstancesV2 (with ``list_instance_metadata`` and, for ``kccm explain node``,
``describe_instance``), the legacy Instances and Zones. No
load balancer: upstream has one only through NSX-T (``loadbalancer/``), which kccm does not
implement; no routes (upstream's also need NSX-T); no clusters (as upstream).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import TextIO

from kccm.cloudprovider import (
    CloudAPICalls,
    CloudProviderInitError,
    ControllerClientBuilder,
    InstanceDescriber,
    InstanceMetadataLister,
    Instances,
    InstancesV2,
    Interface,
    Zones,
)
from kccm.providers.vsphere.config import load_vsphere_config
from kccm.providers.vsphere.configtypes import VSphereConfig
from kccm.providers.vsphere.credentials import CredentialError, CredentialStore
from kccm.providers.vsphere.instances import VCenterClient, VSphereInstances
from kccm.providers.vsphere.inventory import Inventory
from kccm.providers.vsphere.session import LoginError, TagClient, VCenterSession, VSphereAPIError
from kccm.providers.vsphere.zones import ZoneLookup

__all__ = ["CLIENT_NAME", "PROVIDER_NAME", "VSphereCloud", "new_vsphere_cloud"]

log = logging.getLogger(__name__)

PROVIDER_NAME = "vsphere"
CLIENT_NAME = "vsphere-cloud-controller-manager"
"""Upstream ``ClientName``: the Kubernetes client that reads the credentials Secret."""
INVENTORY_MAX_AGE = 5.0
"""Seconds an inventory snapshot answers lookups (a miss re-reads after one second)."""
TAG_CACHE_SECONDS = 60.0


class VSphereCloud:
    """The provider; instance methods are plain ``def`` (pyvmomi blocks) run in threads."""

    def __init__(
        self,
        config: VSphereConfig,
        *,
        inventory_max_age: float = INVENTORY_MAX_AGE,
        tag_cache_seconds: float = TAG_CACHE_SECONDS,
    ) -> None:
        self.config = config
        self.ledger = CloudAPICalls()
        self.credentials = CredentialStore(config)
        self.sessions: dict[str, VCenterSession] = {}
        clients: list[VCenterClient] = []
        labels = (config.zone_category, config.region_category)
        for name, vc in config.vcenters.items():
            session = VCenterSession(
                vc, self.credentials, self.ledger, timeout=config.request_timeout
            )
            self.sessions[name] = session
            zones = None
            if config.zones_enabled:
                tags = TagClient(
                    vc,
                    self.credentials,
                    self.ledger,
                    timeout=config.request_timeout,
                    soap=session,
                )
                zones = ZoneLookup(tags, labels, cache_seconds=tag_cache_seconds)
            clients.append(VCenterClient(Inventory(session, max_age=inventory_max_age), zones))
        self._instances = VSphereInstances(config, clients)
        self._watch: asyncio.Task[None] | None = None
        self._logout: asyncio.Task[None] | None = None

    def verify(self, *, secret_based: bool) -> None:
        """Log in to each vCenter whose credentials come from the config (``secret_based``:
        from a Secret or directory). Refused or missing credentials raise
        :class:`~kccm.cloudprovider.CloudProviderInitError`; an unreachable vCenter is only
        reported (it may come back), and so is a Secret that does not exist yet: upstream's
        ``Initialize`` logs in nowhere and its lookups wait for the Secret (issue 25), so
        kccm keeps running and logs in on the first lookup after the Secret appears."""
        unseen = self.credentials.unseen() if secret_based else {}
        for session in self.sessions.values():
            if bool(session.vc.secret_ref) != secret_based:
                continue
            if session.vc.secret_ref in unseen:  # may still come: wait, never exit (issue 25)
                log.warning("vsphere: %s", self.credentials.waiting_for(session.vc))
                continue
            try:
                session.login()
            except (LoginError, CredentialError) as err:
                raise CloudProviderInitError(str(err)) from err
            except VSphereAPIError as err:
                log.warning("vsphere: %s (will retry on first use)", err)

    def cloud_api_calls(self) -> CloudAPICalls:
        return self.ledger

    async def initialize(
        self, client_builder: ControllerClientBuilder | None, stop: asyncio.Event
    ) -> None:
        refs = self.credentials.secret_refs()
        if refs:
            if client_builder is None:
                raise CloudProviderInitError(
                    "vsphere: the credentials are in a Secret but no Kubernetes client was given"
                )
            client = client_builder.client(CLIENT_NAME)
            await self.credentials.load(client)
            self._watch = asyncio.create_task(
                self.credentials.watch(client, stop), name="vsphere-credentials-watch"
            )
        await asyncio.to_thread(self.verify, secret_based=True)
        self._logout = asyncio.create_task(self._logout_when(stop), name="vsphere-logout")
        log.info(
            "vsphere provider: vCenter %s; zones from tag categories %s",
            ", ".join(f"{vc.server}:{vc.port}" for vc in self.config.vcenters.values()),
            f"{self.config.zone_category!r}/{self.config.region_category!r}"
            if self.config.zones_enabled
            else "(none: [Labels] zone and region not both set)",
        )

    async def _logout_when(self, stop: asyncio.Event) -> None:
        """End the vCenter sessions when the daemon stops (upstream ``logout``)."""
        await stop.wait()
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        """Log out of every vCenter (tests and tools; the daemon just exits)."""
        if self._watch is not None:
            self._watch.cancel()
        for session in self.sessions.values():
            with contextlib.suppress(Exception):
                session.close()

    def load_balancer(self) -> None:
        return None

    def instances(self) -> VSphereInstances:
        return self._instances

    def instances_v2(self) -> VSphereInstances:
        return self._instances

    def zones(self) -> VSphereInstances:
        return self._instances

    def clusters(self) -> None:
        return None

    def routes(self) -> None:
        return None

    def provider_name(self) -> str:
        return PROVIDER_NAME

    def has_cluster_id(self) -> bool:
        return True  # upstream HasClusterID: always true (no cluster tagging in vSphere)


def new_vsphere_cloud(
    config: TextIO | str | None, *, environ: Mapping[str, str] | None = None
) -> VSphereCloud:
    """The ``vsphere`` factory (entry point ``kccm.cloud_providers``): parses the config with
    the ``VSPHERE_*`` overrides from ``environ`` (default: the process environment) and logs
    in with the credentials it holds, so a wrong password stops the start."""
    cloud = VSphereCloud(load_vsphere_config(config, environ))
    cloud.verify(secret_based=False)
    return cloud


def _implements(
    cloud: VSphereCloud, instances: VSphereInstances
) -> tuple[Interface, Instances, InstancesV2, InstanceDescriber, InstanceMetadataLister, Zones]:
    """Never called: mypy checks here that each capability implements its Protocol."""
    return (cloud, instances, instances, instances, instances, instances)
