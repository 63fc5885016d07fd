"""A test-only cloud provider for the daemon's shutdown tests (``--cloud-provider=
hanging_cloud:new_hanging_cloud`` with this directory on PYTHONPATH).

It is the fake cloud, except that the method named by ``$KCCM_TEST_HANG`` (``initialize`` or
``instance_metadata``) becomes a plain blocking function that never returns: kccm runs it in
a worker thread of its provider pool, as it would a stuck SDK call. The method prints
``HANGING <method>`` to stderr first, so a test can wait for it instead of sleeping.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, TextIO

from kccm.providers.fake import FakeCloud, new_fake_cloud

HANG = "KCCM_TEST_HANG"
MARKER = "HANGING"


def _never_returns(method: str) -> Any:
    def block(*_args: Any) -> None:
        print(f"{MARKER} {method}", file=sys.stderr, flush=True)
        threading.Event().wait()

    return block


def new_hanging_cloud(config: TextIO | None) -> FakeCloud:
    cloud = new_fake_cloud(config)
    method = os.environ.get(HANG, "")
    if method:
        setattr(cloud, method, _never_returns(method))
    return cloud
