"""The fake's faults, one per :class:`~kccm.cloudprovider.reasons.Reason` a cloud can cause.

A test makes the fake fail in two ways:

- :meth:`FakeCloud.fail_with(method, kind) <kccm.providers.fake.FakeCloud.fail_with>`: the
  next calls of ``method`` raise the contract error of ``kind`` (in process);
- the Service annotation ``fake.kccm.io/fail: <kind>``: ``ensure_load_balancer`` and
  ``update_load_balancer`` of that Service raise it, for as long as the annotation is there
  (a daemon run as a subprocess, the real apiserver). An unknown kind is itself an invalid
  annotation (``invalid-config`` naming ``fake.kccm.io/fail``).

Kinds: ``quota-exceeded``, ``throttled``, ``permission-denied``, ``invalid-config``,
``waiting-on-cloud`` (the balancer is still provisioning: a retry in
:data:`PROVISIONING_RETRY_AFTER` s), ``cloud-api-error`` and ``error`` (not the cloud's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kccm.cloudprovider import (
    CloudProviderError,
    InvalidServiceConfig,
    PermissionDenied,
    QuotaExceeded,
    StillProvisioning,
    Throttled,
)
from kccm.providers.fake.model import FakeCloudError

__all__ = ["FAULT_ANNOTATION", "FAULT_KINDS", "PROVISIONING_RETRY_AFTER", "fault", "service_fault"]

FAULT_ANNOTATION = "fake.kccm.io/fail"
PROVISIONING_RETRY_AFTER = 5.0

FAULT_KINDS: Mapping[str, Callable[[str], BaseException]] = {
    "quota-exceeded": lambda m: QuotaExceeded(m or "fake: load balancer quota exceeded"),
    "throttled": lambda m: Throttled(m or "fake: request rate limit exceeded"),
    "permission-denied": lambda m: PermissionDenied(
        m or "fake: not authorized to create load balancers"
    ),
    "invalid-config": lambda m: InvalidServiceConfig(
        FAULT_ANNOTATION, m or "the Service asks for something the fake cannot do"
    ),
    "waiting-on-cloud": lambda m: StillProvisioning(
        m or "fake: load balancer still provisioning", PROVISIONING_RETRY_AFTER
    ),
    "cloud-api-error": lambda m: CloudProviderError(m or "fake: internal error of the cloud API"),
    "error": lambda m: FakeCloudError(m or "fake: error"),
}


def fault(kind: str, message: str = "") -> BaseException:
    """The error of ``kind`` (ValueError for an unknown kind)."""
    make = FAULT_KINDS.get(kind)
    if make is None:
        raise ValueError(f"unknown fault {kind!r}: one of {', '.join(FAULT_KINDS)}")
    return make(message)


def service_fault(service: Mapping[str, Any]) -> BaseException | None:
    """The fault the Service's ``fake.kccm.io/fail`` annotation asks for, if any."""
    annotations = (service.get("metadata") or {}).get("annotations") or {}
    kind = annotations.get(FAULT_ANNOTATION)
    if kind is None:
        return None
    try:
        return fault(str(kind))
    except ValueError as err:
        return InvalidServiceConfig(FAULT_ANNOTATION, f"annotation {FAULT_ANNOTATION}: {err}")
