"""The config from the ``azure-cloud-provider`` Secret (no ``--cloud-config``).

Upstream: ``NewCloudFromSecret`` (``pkg/provider/azure.go``) with ``configloader``'s defaults
(``pkg/azclient/configloader/loader_secret.go``, v1.36.5): namespace ``kube-system``, name
``azure-cloud-provider``, key ``cloud-config``. Only read in that mode, so the shipped RBAC
(``deploy/rbac.yaml``) grants no Secret; the opt-in grant is
``examples/azure/config-secret-reader-rbac.yaml`` (docs/providers/azure.md).
"""

from __future__ import annotations

import base64
from typing import Any

from kccm.cloudprovider import CloudProviderInitError
from kccm.kube.errors import KubeError, NotFound
from kccm.kube.resources import SECRETS

__all__ = ["CONFIG_SECRET", "read_config_secret"]

CONFIG_SECRET = ("kube-system", "azure-cloud-provider", "cloud-config")
"""``configloader``'s defaults: namespace, name and key of the config Secret."""


async def read_config_secret(client: Any, where: tuple[str, str, str] = CONFIG_SECRET) -> str:
    """The Secret's config text; a missing Secret or key stops the start (one line)."""
    namespace, name, key = where
    try:
        secret = await client.get(SECRETS, name, namespace=namespace)
    except NotFound as err:
        raise CloudProviderInitError(
            f"azure: no --cloud-config, and no Secret {namespace}/{name}: give one of them"
        ) from err
    except KubeError as err:
        raise CloudProviderInitError(
            f"azure: cannot read Secret {namespace}/{name}: {err}"
        ) from err
    data = (secret or {}).get("data") or {}
    if key not in data:
        raise CloudProviderInitError(f"azure: Secret {namespace}/{name} has no key {key!r}")
    return base64.b64decode(str(data[key])).decode("utf-8")
