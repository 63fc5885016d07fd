"""Helpers from upstream ``cloud.go``: load-balancer names and provider IDs."""

from __future__ import annotations

from kccm.cloudprovider.adapter import DEFAULT_ADAPTER, ProviderCaller
from kccm.cloudprovider.errors import InstanceNotFound, NotImplementedByProvider
from kccm.cloudprovider.interface import Interface
from kccm.cloudprovider.types import NodeName, Service

__all__ = [
    "MAX_DEFAULT_LOAD_BALANCER_NAME",
    "InstancesUnsupported",
    "default_load_balancer_name",
    "get_instance_provider_id",
    "make_provider_id",
    "split_provider_id",
]

MAX_DEFAULT_LOAD_BALANCER_NAME = 32
_SCHEME_SEPARATOR = "://"


class InstancesUnsupported(Exception):
    """The provider does not support the legacy Instances interface."""


def default_load_balancer_name(service: Service) -> str:
    """``"a"`` + the service UID without dashes, cut to 32 characters (upstream's default).

    The leading letter keeps GCE happy (names start with a lowercase letter); 32 is AWS's limit.
    """
    uid = str(service.get("metadata", {}).get("uid", ""))
    return ("a" + uid).replace("-", "")[:MAX_DEFAULT_LOAD_BALANCER_NAME]


def make_provider_id(provider_name: str, instance_id: str) -> str:
    """``<provider-name>://<instance-id>``, the documented providerID format."""
    return f"{provider_name}{_SCHEME_SEPARATOR}{instance_id}"


def split_provider_id(provider_id: str) -> tuple[str, str]:
    """Split ``<provider>://<instance>`` into its two parts.

    Raises :class:`ValueError` when the scheme or the instance part is missing.
    """
    scheme, sep, rest = provider_id.partition(_SCHEME_SEPARATOR)
    if not sep or not scheme or not rest:
        raise ValueError(f"providerID {provider_id!r} is not of the form <provider>://<instance>")
    return scheme, rest


async def get_instance_provider_id(
    cloud: Interface, node_name: NodeName, *, caller: ProviderCaller | None = None
) -> str:
    """The providerID of node ``node_name`` via the legacy Instances API (upstream helper).

    ``InstanceNotFound`` and ``NotImplementedByProvider`` propagate unchanged; any other error
    is wrapped as "failed to get instance ID from cloud provider: ...".
    """
    instances = cloud.instances()
    if instances is None:
        raise InstancesUnsupported("failed to get instances from cloud provider")
    runner = caller if caller is not None else DEFAULT_ADAPTER
    try:
        instance_id = await runner.call("instance_id", instances.instance_id, node_name)
    except (InstanceNotFound, NotImplementedByProvider):
        raise
    except Exception as err:
        raise RuntimeError(f"failed to get instance ID from cloud provider: {err}") from err
    return make_provider_id(cloud.provider_name(), instance_id)
