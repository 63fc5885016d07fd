"""Extra User-Agent components for the providers' cloud clients (``--user-agent``).

OCCM's ``--user-agent`` (``AddExtraFlags`` in ``pkg/openstack/openstack.go`` v1.36.0, a
repeatable ``StringArray``) lands in a package variable that ``client.NewOpenStackClient``
prepends, one by one, to the client's User-Agent (gophercloud ``UserAgent.Prepend``): the last
one given comes first. kccm keeps the values here, set once by the daemon before it builds the
provider; a provider that honours them builds its User-Agent with :func:`user_agent`.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["extra_user_agent", "set_extra_user_agent", "user_agent"]

_extra: tuple[str, ...] = ()


def set_extra_user_agent(values: Iterable[str]) -> None:
    """The ``--user-agent`` values, in the order given."""
    global _extra  # one process-wide setting, as upstream's package variable
    _extra = tuple(values)


def extra_user_agent() -> tuple[str, ...]:
    return _extra


def user_agent(own: str) -> str:
    """``own`` with the extra components prepended as gophercloud prepends them (each in
    front of the ones before it), joined by spaces."""
    return " ".join([*reversed(_extra), own])
