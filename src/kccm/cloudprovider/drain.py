"""Draining a Node's targets: how long a Service's balancer keeps a leaving Node draining.

kccm's annotation :data:`ANNOTATION_DRAIN_SECONDS` (whole seconds, ``0`` to
:data:`MAX_DRAIN_SECONDS`) asks for it per Service; ``--default-drain-seconds`` gives the
answer for Services without the annotation (the annotation wins both ways, ``0`` turning it
off). ``0`` everywhere is upstream's behaviour: a leaving Node is removed at once. A provider
drains through the optional :class:`~kccm.cloudprovider.interface.TargetDrainer`; the
semantics are in docs/behaviour.md, "Draining a Node's targets".
"""

from __future__ import annotations

from dataclasses import dataclass

from kccm.cloudprovider.annotations import OnInvalid, annotations_of, int_annotation
from kccm.cloudprovider.types import Service

__all__ = [
    "ANNOTATION_DRAIN_SECONDS",
    "DEFAULT_DRAIN_SECONDS_FLAG",
    "MAX_DRAIN_SECONDS",
    "DrainTime",
    "drain_time_of",
]

ANNOTATION_DRAIN_SECONDS = "service.kccm.io/drain-seconds"
"""kccm's annotation: seconds a Node leaving the balancer's node set stays draining."""
DEFAULT_DRAIN_SECONDS_FLAG = "--default-drain-seconds"
"""The flag giving the drain time of Services without the annotation."""
MAX_DRAIN_SECONDS = 3600
"""The longest drain time accepted (AWS's longest deregistration delay)."""


@dataclass(frozen=True)
class DrainTime:
    """A Service's drain time and what set it (for Events and explain)."""

    seconds: int
    source: str
    """``annotation service.kccm.io/drain-seconds``, ``flag --default-drain-seconds`` or
    ``default`` (neither: upstream's removal at once)."""


def drain_time_of(service: Service, default: int) -> DrainTime:
    """The Service's drain time: its annotation, else ``default`` (the flag). A value that
    does not parse, or is out of range, is refused (kccm's own annotations always refuse)
    with the annotation named."""
    annotations = annotations_of(service)
    if annotations.get(ANNOTATION_DRAIN_SECONDS, ""):
        seconds = int_annotation(
            annotations,
            ANNOTATION_DRAIN_SECONDS,
            0,
            minimum=0,
            maximum=MAX_DRAIN_SECONDS,
            on_invalid=OnInvalid.REFUSE,
        )
        return DrainTime(seconds, f"annotation {ANNOTATION_DRAIN_SECONDS}")
    if default > 0:
        return DrainTime(default, f"flag {DEFAULT_DRAIN_SECONDS_FLAG}")
    return DrainTime(0, "default")
