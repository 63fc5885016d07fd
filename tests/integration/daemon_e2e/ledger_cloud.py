"""A test-only cloud provider for the two-daemon tests (``--cloud-provider=
ledger_cloud:new_ledger_cloud`` with this directory on PYTHONPATH).

It is the fake cloud, writing every load-balancer call it receives to the JSON-lines file
``$KCCM_TEST_LEDGER`` as ``{"method": ..., "service": "namespace/name"}``, and the names of
the balancers it holds after each call (``"balancers": [...]``): the test reads each daemon's
calls and what its cloud still holds from outside the process.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any, TextIO

from kccm.providers.fake import FakeCloud, new_fake_cloud
from kccm.providers.fake.config import FakeCloudConfig

LEDGER = "KCCM_TEST_LEDGER"
LOAD_BALANCER_CALLS = frozenset(
    {
        "get_load_balancer",
        "get_load_balancer_name",
        "ensure_load_balancer",
        "update_load_balancer",
        "ensure_load_balancer_deleted",
    }
)


class LedgerCloud(FakeCloud):
    """The fake cloud with its load-balancer calls written to a file."""

    ledger_path = ""
    _ledger_lock = threading.Lock()

    async def _enter(self, method: str, *args: Any) -> None:
        await super()._enter(method, *args)
        if method in LOAD_BALANCER_CALLS:
            self._write({"method": method, "service": str(args[1]), "phase": "call"})

    def _write(self, entry: dict[str, Any]) -> None:
        with self._ledger_lock, open(self.ledger_path, "a") as sink:
            sink.write(json.dumps(entry) + "\n")

    async def ensure_load_balancer(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().ensure_load_balancer(*args, **kwargs)
        finally:
            self._held()

    async def ensure_load_balancer_deleted(self, *args: Any, **kwargs: Any) -> None:
        try:
            await super().ensure_load_balancer_deleted(*args, **kwargs)
        finally:
            self._held()

    def _held(self) -> None:
        held = sorted(b.service for b in self.balancers.values())
        self._write({"phase": "held", "balancers": held})


def new_ledger_cloud(config: TextIO | None) -> FakeCloud:
    cloud = new_fake_cloud(config)
    cloud.__class__ = LedgerCloud  # the fake built from its config, with the ledger's methods
    assert isinstance(cloud, LedgerCloud)
    cloud.ledger_path = os.environ[LEDGER]
    return cloud


new_ledger_cloud.config_schema = FakeCloudConfig  # type: ignore[attr-defined]
