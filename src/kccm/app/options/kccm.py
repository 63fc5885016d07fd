"""All flag groups together (upstream ``CloudControllerManagerOptions``)."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Protocol

from kccm.app.config import (
    ConfigurationError,
    ManagerConfig,
)
from kccm.app.flags import FlagSet
from kccm.app.options.authentication import AuthenticationOptions
from kccm.app.options.authorization import AuthorizationOptions
from kccm.app.options.cloudclient import CloudClientOptions
from kccm.app.options.debugging import DebuggingOptions
from kccm.app.options.gate import GateOptions
from kccm.app.options.generic import GenericOptions
from kccm.app.options.globalflags import GlobalOptions
from kccm.app.options.leaderelection import LeaderElectionOptions
from kccm.app.options.leadermigration import LeaderMigrationOptions
from kccm.app.options.logs import LogsOptions
from kccm.app.options.misc import MiscOptions
from kccm.app.options.nodecontroller import NodeControllerFlags
from kccm.app.options.provider import provider_errors
from kccm.app.options.servicecontroller import ServiceControllerFlags
from kccm.app.options.serving import SecureServingOptions
from kccm.app.options.shared import KubeCloudSharedOptions
from kccm.app.options.webhook import WebhookOptions
from kccm.cloudprovider.registry import CloudProviderRegistry, default_registry
from kccm.controllers.table import ControllerOptions


class FlagGroup(Protocol):
    """What every flag group provides (upstream's ``AddFlags`` / ``Validate`` / ``ApplyTo``)."""

    def add_flags(self, fs: FlagSet) -> None: ...
    def validate(self) -> list[str]: ...
    def apply_to(self, config: ManagerConfig) -> None: ...


@dataclass
class KccmOptions:
    """Every flag group; ``config()`` validates all of them and builds the ManagerConfig.

    ``controller_options`` holds each controller's own options; the groups that carry a
    controller's flags bind them straight to those objects (wired in ``__post_init__``)."""

    controller_options: ControllerOptions = field(default_factory=ControllerOptions)
    shared: KubeCloudSharedOptions = field(init=False)
    generic: GenericOptions = field(default_factory=GenericOptions)
    leader_election: LeaderElectionOptions = field(default_factory=LeaderElectionOptions)
    node_controller: NodeControllerFlags = field(init=False)
    service_controller: ServiceControllerFlags = field(init=False)
    debugging: DebuggingOptions = field(default_factory=DebuggingOptions)
    leader_migration: LeaderMigrationOptions = field(default_factory=LeaderMigrationOptions)
    secure_serving: SecureServingOptions = field(default_factory=SecureServingOptions)
    authentication: AuthenticationOptions = field(default_factory=AuthenticationOptions)
    authorization: AuthorizationOptions = field(default_factory=AuthorizationOptions)
    webhook: WebhookOptions = field(init=False)
    misc: MiscOptions = field(init=False)
    logs: LogsOptions = field(init=False)
    gate: GateOptions = field(default_factory=GateOptions)
    cloud_client: CloudClientOptions = field(default_factory=CloudClientOptions)
    global_: GlobalOptions = field(default_factory=GlobalOptions)

    def __post_init__(self) -> None:
        controllers = self.controller_options
        self.shared = KubeCloudSharedOptions(
            route=controllers.route, lifecycle=controllers.node_lifecycle
        )
        self.node_controller = NodeControllerFlags(node=controllers.node)
        self.service_controller = ServiceControllerFlags(service=controllers.service)
        self.webhook = WebhookOptions(serving=self.secure_serving)
        self.misc = MiscOptions(node=controllers.node)
        self.logs = LogsOptions(generic=self.generic)

    def groups(self) -> list[FlagGroup]:
        """In flag registration order (the order of ``docs/flags.md``)."""
        return [
            getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name != "controller_options"
        ]

    def flag_set(self, name: str = "kccm") -> FlagSet:
        fs = FlagSet(name)
        for group in self.groups():
            group.add_flags(fs)
        return fs

    def validate(self, registry: CloudProviderRegistry = default_registry) -> list[str]:
        errors = [error for group in self.groups() for error in group.validate()]
        if self.shared.cloud_provider:
            errors += provider_errors(
                self.shared.cloud_provider, self.shared.cloud_config, registry
            )
        return errors

    def config(self, registry: CloudProviderRegistry = default_registry) -> ManagerConfig:
        """Validate every group and build the config; raises :class:`ConfigurationError`."""
        errors = self.validate(registry)
        if errors:
            raise ConfigurationError(errors)
        config = ManagerConfig(
            cloud_provider=self.shared.cloud_provider,
            controller_options=copy.deepcopy(self.controller_options),
        )
        for group in self.groups():
            group.apply_to(config)
        return config
