"""Where the API server is and how to authenticate, resolved as client-go's
``clientcmd.BuildConfigFromFlags(master, kubeconfig)`` does:

- neither given: in-cluster service account (KUBERNETES_SERVICE_HOST/PORT + token + CA),
  falling back to $KUBECONFIG or ~/.kube/config when not running in a pod;
- ``kubeconfig`` given: that file (current context unless ``context`` names one);
- ``master`` given: it overrides the server URL of whatever was loaded (or stands alone).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import msgspec
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.core.exceptions import ConfigError as _LightkubeConfigError

__all__ = ["ClusterConfig", "KubeConfigError", "load_cluster_config"]

_SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class KubeConfigError(Exception):
    """The kubeconfig / in-cluster configuration could not be loaded."""


@dataclass(frozen=True)
class ClusterConfig:
    """A resolved connection target (opaque outside kccm.kube)."""

    single: SingleConfig
    source: str

    @property
    def server(self) -> str:
        return str(self.single.cluster.server)

    @property
    def user_name(self) -> str:
        return str(self.single.context.user or "")


def _with_server(single: SingleConfig, master: str) -> SingleConfig:
    cluster = msgspec.structs.replace(single.cluster, server=master)
    return single._replace(cluster=cluster)


def _from_file(path: str, context: str | None) -> SingleConfig:
    if not Path(path).is_file():
        raise KubeConfigError(f"kubeconfig {path!r} does not exist or is not a file")
    try:
        single = KubeConfig.from_file(path).get(context_name=context)
    except KeyError as exc:
        raise KubeConfigError(f"kubeconfig {path!r} lacks the key {exc}") from exc
    except (_LightkubeConfigError, OSError, ValueError, TypeError) as exc:
        raise KubeConfigError(f"kubeconfig {path!r}: {exc}") from exc
    if single is None:
        raise KubeConfigError(f"kubeconfig {path!r} has no usable context")
    return single


def _in_cluster(service_account_dir: str) -> SingleConfig | None:
    if not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    try:
        return KubeConfig.from_service_account(service_account_dir).get()
    except (_LightkubeConfigError, KeyError, OSError) as exc:
        raise KubeConfigError(f"in-cluster configuration: {exc}") from exc


def load_cluster_config(
    kubeconfig: str | None = None,
    master: str | None = None,
    *,
    context: str | None = None,
    service_account_dir: str = _SERVICE_ACCOUNT_DIR,
) -> ClusterConfig:
    """Resolve the connection target; raises :class:`KubeConfigError` with the reason."""
    if kubeconfig:
        single, source = _from_file(kubeconfig, context), f"kubeconfig {kubeconfig}"
    elif master:
        standalone = KubeConfig.from_server(master).get()
        if standalone is None:  # pragma: no cover - lightkube always returns one here
            raise KubeConfigError(f"cannot build a configuration for {master!r}")
        single, source = standalone, f"--master {master}"
    else:
        in_cluster = _in_cluster(service_account_dir)
        if in_cluster is not None:
            single, source = in_cluster, "in-cluster service account"
        else:
            path = os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
            single, source = _from_file(path, context), f"kubeconfig {path}"
    if master:
        single = _with_server(single, master)
    return ClusterConfig(single=single, source=source)
