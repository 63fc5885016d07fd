"""Where the API server is and how to authenticate, resolved as client-go's
``clientcmd.BuildConfigFromFlags(master, kubeconfig)`` does:

- neither given: the in-cluster service account (KUBERNETES_SERVICE_HOST/PORT + token + CA)
  and nothing else: like client-go, $KUBECONFIG and ~/.kube/config are not consulted, so
  outside a pod this is an error that says which flag to pass;
- ``kubeconfig`` given: that file (current context unless ``context`` names one);
- ``master`` given: it overrides the server URL of whatever was loaded (or stands alone).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import msgspec
import yaml
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.core.exceptions import ConfigError as _LightkubeConfigError

__all__ = ["ClusterConfig", "KubeConfigError", "load_cluster_config", "with_endpoint"]

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


_NOT_IN_CLUSTER = (
    "neither --kubeconfig nor --master was given and kccm is not running in a cluster "
    "(KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set): pass --kubeconfig"
)


def _read_document(path: str) -> dict[str, object]:
    """The kubeconfig's YAML mapping; a clear error for anything else."""
    if not Path(path).is_file():
        raise KubeConfigError(f"kubeconfig {path!r} does not exist or is not a file")
    try:
        document = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise KubeConfigError(f"kubeconfig {path!r} cannot be read: {exc}") from exc
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise KubeConfigError(f"kubeconfig {path!r} is not valid YAML{line}") from exc
    if not isinstance(document, dict) or document.get("kind", "Config") != "Config":
        raise KubeConfigError(
            f"kubeconfig {path!r} is not a kubeconfig (expected a YAML mapping of kind Config "
            "with clusters, contexts and users)"
        )
    return document


def _from_file(path: str, context: str | None) -> SingleConfig:
    document = _read_document(path)
    try:
        single = KubeConfig.from_dict(document, fname=Path(path)).get(context_name=context)
    except KeyError as exc:
        raise KubeConfigError(f"kubeconfig {path!r} lacks the key {exc}") from exc
    except (_LightkubeConfigError, OSError, ValueError, TypeError, AttributeError) as exc:
        raise KubeConfigError(f"kubeconfig {path!r}: {exc}") from exc
    if single is None:
        raise KubeConfigError(f"kubeconfig {path!r} has no usable context")
    return single


def _in_cluster(service_account_dir: str) -> SingleConfig:
    if not (
        os.environ.get("KUBERNETES_SERVICE_HOST") and os.environ.get("KUBERNETES_SERVICE_PORT")
    ):
        raise KubeConfigError(_NOT_IN_CLUSTER)
    try:
        single = KubeConfig.from_service_account(service_account_dir).get()
    except (_LightkubeConfigError, KeyError, OSError) as exc:
        raise KubeConfigError(f"in-cluster configuration: {exc}") from exc
    if single is None:  # pragma: no cover - lightkube always returns one here
        raise KubeConfigError("in-cluster configuration: no usable context")
    return single


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
        single, source = _in_cluster(service_account_dir), "in-cluster service account"
    if master:
        single = _with_server(single, master)
    return ClusterConfig(single=single, source=source)


def with_endpoint(
    config: ClusterConfig, url: str, *, ca_file: str | None = None, insecure: bool = False
) -> ClusterConfig:
    """``config``'s credentials sent to ``url`` instead of the API server (``kccm explain
    --endpoint``): trusting ``ca_file``, or nothing (``insecure``), or the system's CAs."""
    cluster = msgspec.structs.replace(
        config.single.cluster,
        server=url,
        certificate_auth=ca_file,
        certificate_auth_data=None,
        insecure=insecure,
    )
    return ClusterConfig(single=config.single._replace(cluster=cluster), source=f"--endpoint {url}")
