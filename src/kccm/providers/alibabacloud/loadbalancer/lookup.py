"""How upstream finds a Service's balancer, CLB (``FindLoadBalancer``, ``clbv1``) and NLB
(``FindNLB``, ``nlbv2``) alike: by the ``loadbalancer-id`` annotation, else by the tag
``kubernetes.do.not.delete=<default name>``, else by that name; more than one match is an
error naming their IDs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from kccm.cloudprovider import Service, default_load_balancer_name
from kccm.providers.alibabacloud.errors import AlibabaError
from kccm.providers.alibabacloud.loadbalancer.annotations import value
from kccm.providers.alibabacloud.loadbalancer.spec import NAME_TAG

__all__ = ["find_balancer"]


class _Found(Protocol):
    @property
    def id(self) -> str: ...


B = TypeVar("B", bound=_Found)


def find_balancer(
    service: Service,
    by_id: Callable[[str], B],
    missing: Callable[[AlibabaError], bool],
    search: Callable[..., Sequence[B]],
    plural: str,
) -> B | None:
    """The balancer of ``service``: ``by_id`` for the annotation's ID (``None`` when
    ``missing`` says the error means it does not exist), else ``search(tag=...)`` then
    ``search(name=...)``; ``plural`` names the kind in upstream's error."""
    reuse = value(service, "loadbalancer-id") or ""
    if reuse:
        try:
            found = by_id(reuse)
        except AlibabaError as err:
            if missing(err):
                return None
            raise
        if found.id != reuse:
            raise AlibabaError(f"find loadbalancer by id {reuse}: the API gave {found.id!r}")
        return found
    name = default_load_balancer_name(service)
    for how, by_tag in (("tag", True), ("name", False)):
        found_all = search(tag=(NAME_TAG, name)) if by_tag else search(name=name)
        if len(found_all) > 1:
            ids = ",".join(b.id for b in found_all)
            raise AlibabaError(f"find multiple {plural} by {how}, lbIds[{ids}]")
        if found_all:
            return found_all[0]
    return None
