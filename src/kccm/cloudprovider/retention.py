"""Address retention: whether a Service's balancer keeps its address when it is released.

kccm's own annotation :data:`ANNOTATION_RETAIN_ADDRESS` (``"true"``/``"false"``, Go's
``ParseBool``) asks for it per Service; ``--default-retain-address`` sets the cluster-wide
answer for Services without the annotation (the annotation wins both ways). A provider keeps
the address through the optional
:class:`~kccm.cloudprovider.interface.AddressRetainer`; the semantics are in
docs/behaviour.md, "Keeping a balancer's address".
"""

from __future__ import annotations

from dataclasses import dataclass

from kccm.cloudprovider.annotations import OnInvalid, annotations_of, bool_annotation
from kccm.cloudprovider.types import Service

__all__ = ["ANNOTATION_RETAIN_ADDRESS", "DEFAULT_RETAIN_ADDRESS_FLAG", "Retention", "retention_of"]

ANNOTATION_RETAIN_ADDRESS = "service.kccm.io/retain-address"
"""kccm's annotation: keep the balancer's address when the balancer is released."""
DEFAULT_RETAIN_ADDRESS_FLAG = "--default-retain-address"
"""The flag giving the answer for Services without the annotation."""


@dataclass(frozen=True)
class Retention:
    """Whether a Service's address is kept, and what said so (for Events and explain)."""

    keep: bool
    source: str
    """``annotation service.kccm.io/retain-address``, ``flag --default-retain-address`` or
    ``default`` (neither is set: upstream's release)."""

    def because(self) -> str:
        """``asked by annotation ...`` / ``asked by flag ...``."""
        return f"asked by {self.source}"


def retention_of(service: Service, default: bool) -> Retention:
    """The Service's retention: its annotation, else ``default`` (the flag). A value that does
    not parse is refused (kccm's own annotations always refuse): the release fails with the
    annotation named, so an address is never lost to a typo."""
    annotations = annotations_of(service)
    if annotations.get(ANNOTATION_RETAIN_ADDRESS, ""):
        keep = bool_annotation(
            annotations, ANNOTATION_RETAIN_ADDRESS, False, on_invalid=OnInvalid.REFUSE
        )
        return Retention(keep, f"annotation {ANNOTATION_RETAIN_ADDRESS}")
    if default:
        return Retention(True, f"flag {DEFAULT_RETAIN_ADDRESS_FLAG}")
    return Retention(False, "default")
