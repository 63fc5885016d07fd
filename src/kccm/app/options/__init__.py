"""``kccm`` flag groups: upstream's named flag sets, one module each (upstream
``cmd/cloud-controller-manager/app/options/*.go`` and ``k8s.io/cloud-provider/options/*.go``).

Every group has ``add_flags(fs)`` (register its flags, upstream names and defaults),
``validate() -> list[str]`` (every problem, each message naming its flag) and
``apply_to(config)`` (write what it owns into the :class:`~kccm.app.config.ManagerConfig`).
A controller's flags bind straight to that controller's own options dataclass (upstream's
groups embed the controller's configuration type). :class:`KccmOptions` holds all groups and
produces the config (upstream ``CloudControllerManagerOptions.Config``).
"""

from kccm.app.config import ConfigurationError
from kccm.app.options.authentication import AuthenticationOptions
from kccm.app.options.authorization import AuthorizationOptions
from kccm.app.options.cloudclient import CloudClientOptions
from kccm.app.options.controllers import (
    controller_errors,
    is_controller_enabled,
    resolve_controllers,
)
from kccm.app.options.debugging import DebuggingOptions
from kccm.app.options.gate import GateOptions
from kccm.app.options.generic import CONTENT_TYPES, KNOWN_FEATURE_GATES, GenericOptions
from kccm.app.options.globalflags import GlobalOptions
from kccm.app.options.kccm import FlagGroup, KccmOptions
from kccm.app.options.leaderelection import LeaderElectionOptions
from kccm.app.options.leadermigration import LeaderMigrationOptions
from kccm.app.options.logs import LOGGING_FORMATS, LogsOptions
from kccm.app.options.misc import MiscOptions
from kccm.app.options.nodecontroller import NodeControllerFlags
from kccm.app.options.servicecontroller import ServiceControllerFlags
from kccm.app.options.serving import SecureServingOptions
from kccm.app.options.shared import KubeCloudSharedOptions
from kccm.app.options.webhook import WebhookOptions

__all__ = [
    "CONTENT_TYPES",
    "KNOWN_FEATURE_GATES",
    "LOGGING_FORMATS",
    "AuthenticationOptions",
    "AuthorizationOptions",
    "CloudClientOptions",
    "ConfigurationError",
    "DebuggingOptions",
    "FlagGroup",
    "GateOptions",
    "GenericOptions",
    "GlobalOptions",
    "KccmOptions",
    "KubeCloudSharedOptions",
    "LeaderElectionOptions",
    "LeaderMigrationOptions",
    "LogsOptions",
    "MiscOptions",
    "NodeControllerFlags",
    "SecureServingOptions",
    "ServiceControllerFlags",
    "WebhookOptions",
    "controller_errors",
    "is_controller_enabled",
    "resolve_controllers",
]
