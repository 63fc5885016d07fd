"""What every capability of the local provider shares: the store, the config, the VIP pool
and the ledger of state-file operations; and the providerID check."""

from __future__ import annotations

from kccm.cloudprovider import (
    CloudAPICalls,
    ForeignProviderID,
)
from kccm.providers.local.config import LocalCloudConfig, VipPool
from kccm.providers.local.store import (
    LocalStore,
)

__all__ = ["PROVIDER_NAME", "LocalBase", "own_provider_id"]

PROVIDER_NAME = "local"


def own_provider_id(provider_id: str, node: str = "") -> str:
    """``provider_id`` when it is a ``local://`` one; else :class:`ForeignProviderID`."""
    scheme, sep, _ = provider_id.partition("://")
    if sep and scheme == PROVIDER_NAME:
        return provider_id
    of = f"node {node!r} has " if node else ""
    raise ForeignProviderID(
        f"{of}providerID {provider_id!r}, which is not a {PROVIDER_NAME}:// one: "
        "it belongs to another cloud provider, so the local provider cannot tell whether "
        "that instance exists"
    )


class LocalBase:
    """The state one :class:`~kccm.providers.local.provider.LocalCloud` shares between its
    capability classes."""

    def __init__(self, store: LocalStore, config: LocalCloudConfig | None = None) -> None:
        self.store = store
        self.config = config or LocalCloudConfig()
        self.pool = VipPool.parse(self.config.global_.vip_range)
        self._api_calls = CloudAPICalls()

    def cloud_api_calls(self) -> CloudAPICalls:
        """The ledger of this provider's state-file operations (reads and writes)."""
        return self._api_calls

    def _read(self, operation: str) -> None:
        self._api_calls.record(operation, mutating=False)

    def _write(self, operation: str) -> None:
        self._api_calls.record(operation, mutating=True)
