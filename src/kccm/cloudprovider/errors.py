"""Errors of the cloud-provider contract, with upstream's messages.

Upstream ``cloud.go`` uses sentinel error values compared with ``==``; here each sentinel is an
exception class whose default message is upstream's text. Providers raise them (optionally with
their own message or chained with ``raise ... from err``); the framework tests for them with
:func:`find_error`, which also looks through ``__cause__`` chains the way ``errors.Is`` looks
through wrapped errors.
"""

from __future__ import annotations

from typing import TypeVar

__all__ = [
    "CloudConfigError",
    "CloudProviderError",
    "CloudProviderInitError",
    "DiskNotFound",
    "DuplicateCloudProvider",
    "ForeignProviderID",
    "ImplementedElsewhere",
    "InstanceNotFound",
    "InvalidServiceConfig",
    "NotImplementedByProvider",
    "PermissionDenied",
    "QuotaExceeded",
    "RetryError",
    "StillProvisioning",
    "Throttled",
    "UnknownCloudProvider",
    "find_error",
]

E = TypeVar("E", bound=BaseException)


class CloudProviderError(Exception):
    """Base class of every error defined by the contract."""

    default_message = "cloud provider error"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message if message is not None else self.default_message)

    @property
    def message(self) -> str:
        return str(self.args[0])


class InstanceNotFound(CloudProviderError):
    """The instance does not exist in the cloud (never raised for stopped instances)."""

    default_message = "instance not found"


class NotImplementedByProvider(CloudProviderError):
    """The provider does not implement this method (upstream ``cloudprovider.NotImplemented``)."""

    default_message = "unimplemented"


class ImplementedElsewhere(CloudProviderError):
    """Another controller owns this resource; the framework must leave it alone."""

    default_message = "implemented by alternate to cloud provider"


class ForeignProviderID(CloudProviderError):
    """A Node whose providerID belongs to another provider (``aws://...``): the provider
    cannot tell whether that instance exists, so it raises this, never "does not exist"
    (``InstanceNotFound``, which would make the lifecycle controller delete the Node)."""

    default_message = "providerID of another cloud provider"


class DiskNotFound(CloudProviderError):
    """The disk does not exist."""

    default_message = "disk is not found"


class RetryError(CloudProviderError):
    """Ask the caller to retry after exactly ``retry_after`` seconds instead of backing off.

    Mirrors upstream ``api.RetryError`` (``NewRetryError(msg, d)``, ``RetryAfter()``).
    """

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = float(retry_after)


class Throttled(CloudProviderError):
    """The cloud API refused the call because of a rate limit or quota.

    ``retry_after`` (seconds) is the cloud's hint, when it gave one. The call gate pauses
    every call of the same method group when it sees this error.
    """

    default_message = "cloud API rate limit exceeded"

    def __init__(self, message: str | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class StillProvisioning(RetryError):
    """The cloud is still making (or changing) the resource: nothing is wrong, look again in
    ``retry_after`` seconds. ``kccm explain`` reports it as "waiting on the cloud"."""

    def __init__(self, message: str = "still provisioning", retry_after: float = 5.0) -> None:
        super().__init__(message, retry_after)


class QuotaExceeded(CloudProviderError):
    """An account quota or service limit refuses the request (too many balancers, target
    groups, listeners, ...): retrying will not help until the quota is raised or something is
    freed. Unlike :class:`Throttled` it does not pause the call gate."""

    default_message = "cloud quota or limit exceeded"


class PermissionDenied(CloudProviderError):
    """The cloud refused the call for lack of permission (the credentials kccm runs with)."""

    default_message = "cloud permission denied"


class InvalidServiceConfig(CloudProviderError):
    """A Service's annotation or field (``key``) asks for something invalid or unsupported.

    ``key`` names the annotation or field (``""`` when none applies); the message names it
    too, so it reaches Events and logs as is."""

    default_message = "invalid service configuration"

    def __init__(self, key: str, message: str | None = None) -> None:
        text = message if message is not None else self.default_message
        super().__init__(text if not key or key in text else f"{key}: {text}")
        self.key = key


class CloudProviderInitError(Exception):
    """The cloud provider could not be selected or built (registry errors)."""


class UnknownCloudProvider(CloudProviderInitError):
    """No provider is registered under the requested name."""


class DuplicateCloudProvider(CloudProviderInitError):
    """Two registrations claim the same provider name."""


class CloudConfigError(ValueError):
    """A cloud config file is invalid; ``issues`` lists every problem found, in file order."""

    def __init__(self, issues: list[str]) -> None:
        self.issues = list(issues)
        super().__init__(_join_issues(self.issues))


def _join_issues(issues: list[str]) -> str:
    if len(issues) == 1:
        return issues[0]
    lines = [f"{len(issues)} errors in cloud config:"]
    lines.extend(f"  {issue}" for issue in issues)
    return "\n".join(lines)


def find_error(error: BaseException | None, kind: type[E]) -> E | None:
    """Return the first exception of type ``kind`` in ``error``'s ``__cause__`` chain."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, kind):
            return error
        seen.add(id(error))
        error = error.__cause__
    return None
