"""Why a sync failed, in the words a user acts on.

:func:`classify` maps an error raised by a provider (or a controller error raised ``from`` one)
to a :class:`Reason`: the contract's error kinds (:mod:`kccm.cloudprovider.errors`) name the
cause, any other :class:`~kccm.cloudprovider.errors.CloudProviderError` is a cloud API error,
and the rest is ``error``. ``kccm explain`` shows the reason and Prometheus counts sync
failures by it (``kccm_sync_failures_total{controller, reason}``).

``no-eligible-nodes`` is no error kind: the service controller decides it (the eligible node
set was empty).
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum

from kccm.cloudprovider.errors import (
    CloudConfigError,
    CloudProviderError,
    InvalidServiceConfig,
    PermissionDenied,
    QuotaExceeded,
    RetryError,
    Throttled,
)

__all__ = ["Reason", "classify", "error_chain"]


class Reason(StrEnum):
    """The cause of a failed (or waiting) sync; the values are stable (metric labels, JSON)."""

    QUOTA = "quota-exceeded"
    THROTTLED = "throttled"
    PERMISSION = "permission-denied"
    INVALID = "invalid-config"
    CLOUD_API = "cloud-api-error"
    NO_NODES = "no-eligible-nodes"
    WAITING = "waiting-on-cloud"
    OTHER = "error"


_KINDS: tuple[tuple[type[BaseException], Reason], ...] = (
    (QuotaExceeded, Reason.QUOTA),
    (Throttled, Reason.THROTTLED),
    (PermissionDenied, Reason.PERMISSION),
    (InvalidServiceConfig, Reason.INVALID),
    (CloudConfigError, Reason.INVALID),
    (RetryError, Reason.WAITING),
)
"""Checked in this order on each error of the chain; StillProvisioning is a RetryError."""


def error_chain(error: BaseException | None) -> Iterator[BaseException]:
    """``error``, then what it was raised from (``__cause__``) or during (``__context__``,
    unless suppressed by ``from None``), each once."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        if error.__cause__ is not None:
            error = error.__cause__
        elif error.__suppress_context__:
            error = None
        else:
            error = error.__context__


def classify(error: BaseException) -> Reason:
    """The reason of ``error``: the outermost error of the chain (see :func:`error_chain`)
    that is one of the contract's kinds decides; else a cloud API error if a provider's
    error is in the chain; else :attr:`Reason.OTHER`."""
    for link in error_chain(error):
        for kind, reason in _KINDS:
            if isinstance(link, kind):
                return reason
    if any(isinstance(link, CloudProviderError) for link in error_chain(error)):
        return Reason.CLOUD_API
    return Reason.OTHER
